package redlatch.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.provider.redis.spring.RedisLockProvider;
import net.javacrumbs.shedlock.support.Utils;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * Drives ShedLock's Redis LockProvider for redlatch's interop tests, the way ShedLock's
 * scheduler integration calls it: {@code LockProvider.lock(LockConfiguration)} and
 * {@code SimpleLock.unlock()}, without Spring's scheduler.
 *
 * Started as {@code java ShedDriver HOST PORT ENV PREFIX}; prints {@code - ready HOSTNAME}
 * (ShedLock's own idea of the host name) once connected. Then reads one command per line,
 * {@code ID COMMAND ARGS...}, runs each on a pool thread and answers {@code ID REPLY}:
 *
 *   ID lock NAME AT_MOST_MS AT_LEAST_MS  ->  ID held HANDLE   (the lock is ours)
 *                                            ID busy          (someone else holds it)
 *   ID unlock HANDLE                     ->  ID ok
 *   ID run NAME AT_MOST_MS AT_LEAST_MS HOLD_MS
 *                                        ->  ID ran START_NANOS END_NANOS | ID busy
 *        (lock, sleep HOLD_MS, unlock: a scheduled job's run; the nanos are the JVM's
 *         System.nanoTime(), CLOCK_MONOTONIC on Linux, so they compare with the test's)
 *
 * Errors answer {@code ID err MESSAGE}.
 */
public final class ShedDriver {
    private static final Map<Long, SimpleLock> HELD = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT = new AtomicLong(1);

    public static void main(String[] args) throws Exception {
        RedisStandaloneConfiguration conf = new RedisStandaloneConfiguration(args[0], Integer.parseInt(args[1]));
        LettuceConnectionFactory factory = new LettuceConnectionFactory(conf);
        factory.afterPropertiesSet();
        factory.start();
        LockProvider provider = new RedisLockProvider.Builder(factory)
                .environment(args[2])
                .keyPrefix(args[3])
                .build();
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        out.println("- ready " + Utils.getHostname());
        ExecutorService pool = Executors.newCachedThreadPool();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            pool.submit(() -> {
                String reply;
                try {
                    reply = handle(provider, w);
                } catch (Exception e) {
                    reply = "err " + e.toString().replace('\n', ' ');
                }
                synchronized (out) {
                    out.println(w[0] + " " + reply);
                }
            });
        }
        pool.shutdownNow();
        factory.destroy();
    }

    private static LockConfiguration config(String name, String atMost, String atLeast) {
        return new LockConfiguration(ClockProvider.now(), name,
                Duration.ofMillis(Long.parseLong(atMost)), Duration.ofMillis(Long.parseLong(atLeast)));
    }

    private static String handle(LockProvider provider, String[] w) throws Exception {
        switch (w[1]) {
            case "lock": {
                Optional<SimpleLock> lock = provider.lock(config(w[2], w[3], w[4]));
                if (lock.isEmpty()) {
                    return "busy";
                }
                long handle = NEXT.getAndIncrement();
                HELD.put(handle, lock.get());
                return "held " + handle;
            }
            case "unlock": {
                HELD.remove(Long.parseLong(w[2])).unlock();
                return "ok";
            }
            case "run": {
                Optional<SimpleLock> lock = provider.lock(config(w[2], w[3], w[4]));
                if (lock.isEmpty()) {
                    return "busy";
                }
                long start = System.nanoTime();
                Thread.sleep(Long.parseLong(w[5]));
                long end = System.nanoTime();
                lock.get().unlock();
                return "ran " + start + " " + end;
            }
            default:
                return "err unknown command " + w[1];
        }
    }
}
