package redlatch.bench;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Redisson 4.x as a peer of redlatch-bench's {@code --workload peers}: the workloads of
 * BENCHMARKS.md run with the real client, on its default configuration (one single-server
 * connection pool, 32 netty threads), timed inside the JVM.
 *
 * <p>{@code Bench serve HOST:PORT} connects, prints {@code ready VERSION}, then runs one
 * command per stdin line and answers each with one JSON line (or {@code err MESSAGE}):
 * <ul>
 *   <li>{@code w1 NAME WARMUP PAIRS}: one thread, WARMUP untimed then PAIRS timed
 *       lock(10 s lease) + unlock pairs on NAME.</li>
 *   <li>{@code w2 PREFIX THREADS MILLIS}: THREADS threads, each on PREFIX:i, pairs as W1's
 *       for MILLIS.</li>
 *   <li>{@code w3 NAME THREADS MILLIS}: THREADS threads contend for NAME with lock() (the
 *       watchdog's lease), a yield inside, unlock(); hand-overs between threads.</li>
 * </ul>
 * The JVM exits when stdin closes.
 *
 * <p>{@code Bench w7 HOST:PORT NAME WARMUP}: one W7 process, as redlatch-bench's own W7
 * child: WARMUP untimed pairs on a name of its own, {@code ready}, then waits for
 * {@code go END} (END in {@code System.nanoTime()}, which is CLOCK_MONOTONIC on Linux,
 * shared by every process), loops lock() / yield / unlock() on NAME until END, prints one
 * {@code called acquired released} line per acquisition and {@code done}, and exits when
 * stdin closes.
 */
public final class Bench {
    private static final PrintStream OUT =
            new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final long LEASE_MS = 10_000;

    private Bench() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Bench serve HOST:PORT | Bench w7 HOST:PORT NAME WARMUP");
            System.exit(2);
        }
        RedissonClient client = connect(args[1]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            if (args[0].equals("w7")) {
                w7(client, in, args[2], Long.parseLong(args[3]));
            } else {
                serve(client, in);
            }
        } finally {
            client.shutdown();
        }
        System.exit(0);
    }

    private static RedissonClient connect(String addr) {
        Config config = new Config();
        config.useSingleServer().setAddress("redis://" + addr);
        return Redisson.create(config);
    }

    private static void say(String line) {
        OUT.println(line);
        OUT.flush();
    }

    private static void serve(RedissonClient client, BufferedReader in) throws Exception {
        say("ready " + Redisson.class.getPackage().getImplementationVersion());
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            try {
                switch (w[0]) {
                    case "w1":
                        say(w1(client, w[1], Long.parseLong(w[2]), Integer.parseInt(w[3])));
                        break;
                    case "w2":
                        say(w2(client, w[1], Integer.parseInt(w[2]), Long.parseLong(w[3])));
                        break;
                    case "w3":
                        say(w3(client, w[1], Integer.parseInt(w[2]), Long.parseLong(w[3])));
                        break;
                    default:
                        say("err unknown command " + w[0]);
                }
            } catch (Throwable e) {
                say("err " + e.getClass().getSimpleName() + ": "
                        + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
        }
    }

    /** This process's CPU time so far (all threads: netty's, the JIT's, the GC's). */
    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    /** The p-th percentile (0-100) of sorted nanosecond samples in microseconds, nearest rank. */
    private static long pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(1, Math.min(rank, sorted.length)) - 1] / 1000;
    }

    private static long[] sorted(List<Long> xs) {
        long[] a = new long[xs.size()];
        for (int i = 0; i < a.length; i++) {
            a[i] = xs.get(i);
        }
        Arrays.sort(a);
        return a;
    }

    private static String num(double d) {
        return String.format(Locale.ROOT, "%.3f", d);
    }

    private static void pair(RLock lock) {
        lock.lock(LEASE_MS, TimeUnit.MILLISECONDS);
        lock.unlock();
    }

    private static String w1(RedissonClient client, String name, long warmup, int pairs) {
        RLock lock = client.getLock(name);
        for (long i = 0; i < warmup; i++) {
            pair(lock);
        }
        long[] lat = new long[pairs];
        long cpu = cpuNanos();
        long started = System.nanoTime();
        for (int i = 0; i < pairs; i++) {
            long t = System.nanoTime();
            pair(lock);
            lat[i] = System.nanoTime() - t;
        }
        long took = System.nanoTime() - started;
        double cpuPerPair = (cpuNanos() - cpu) / 1000.0 / pairs;
        Arrays.sort(lat);
        return "{\"ops\":" + pairs + ",\"seconds\":" + num(took / 1e9) + ",\"p50_us\":" + pct(lat, 50)
                + ",\"p99_us\":" + pct(lat, 99) + ",\"client_cpu_us_per_pair\":" + num(cpuPerPair)
                + ",\"warmup_pairs\":" + warmup + "}";
    }

    private static String w2(RedissonClient client, String prefix, int threads, long millis) throws Exception {
        List<List<Long>> per = new ArrayList<>();
        List<Thread> all = new ArrayList<>();
        AtomicLong failures = new AtomicLong();
        long cpu = cpuNanos();
        long started = System.nanoTime();
        long until = started + millis * 1_000_000L;
        for (int i = 0; i < threads; i++) {
            RLock lock = client.getLock(prefix + ":" + i);
            List<Long> lat = new ArrayList<>(1 << 14);
            per.add(lat);
            Thread t = new Thread(() -> {
                try {
                    while (System.nanoTime() < until) {
                        long s = System.nanoTime();
                        pair(lock);
                        lat.add(System.nanoTime() - s);
                    }
                } catch (RuntimeException e) {
                    failures.incrementAndGet();
                }
            });
            t.start();
            all.add(t);
        }
        for (Thread t : all) {
            t.join();
        }
        long took = System.nanoTime() - started;
        long cpuUsed = cpuNanos() - cpu;
        if (failures.get() > 0) {
            throw new IllegalStateException(failures.get() + " W2 threads failed");
        }
        List<Long> merged = new ArrayList<>();
        per.forEach(merged::addAll);
        long[] lat = sorted(merged);
        long ops = lat.length;
        return "{\"ops\":" + ops + ",\"seconds\":" + num(took / 1e9) + ",\"ops_per_s\":" + num(ops / (took / 1e9))
                + ",\"p50_us\":" + pct(lat, 50) + ",\"p99_us\":" + pct(lat, 99) + ",\"tasks\":" + threads
                + ",\"client_cpu_us_per_pair\":" + num(cpuUsed / 1000.0 / Math.max(1, ops)) + "}";
    }

    /** One W3 acquisition: its place in the total order, its thread, its stamps. */
    private record Rec(long seq, int task, long called, long acquired, long released) {}

    private static String w3(RedissonClient client, String name, int threads, long millis) throws Exception {
        AtomicBoolean inside = new AtomicBoolean();
        AtomicLong violations = new AtomicLong();
        AtomicLong counter = new AtomicLong();
        AtomicLong failures = new AtomicLong();
        List<List<Rec>> per = new ArrayList<>();
        List<Thread> all = new ArrayList<>();
        long started = System.nanoTime();
        long until = started + millis * 1_000_000L;
        for (int i = 0; i < threads; i++) {
            int task = i;
            RLock lock = client.getLock(name);
            List<Rec> recs = new ArrayList<>();
            per.add(recs);
            Thread t = new Thread(() -> {
                try {
                    while (System.nanoTime() < until) {
                        long called = System.nanoTime();
                        lock.lock();
                        long acquired = System.nanoTime();
                        if (inside.getAndSet(true)) {
                            violations.incrementAndGet();
                        }
                        long seq = counter.getAndIncrement();
                        Thread.yield();
                        inside.set(false);
                        lock.unlock();
                        recs.add(new Rec(seq, task, called, acquired, System.nanoTime()));
                    }
                } catch (RuntimeException e) {
                    failures.incrementAndGet();
                }
            });
            t.start();
            all.add(t);
        }
        for (Thread t : all) {
            t.join();
        }
        long took = System.nanoTime() - started;
        if (failures.get() > 0) {
            throw new IllegalStateException(failures.get() + " W3 threads failed");
        }
        List<Rec> recs = new ArrayList<>();
        per.forEach(recs::addAll);
        recs.sort((a, b) -> Long.compare(a.seq(), b.seq()));
        List<Long> hand = new ArrayList<>();
        List<Long> cross = new ArrayList<>();
        List<Long> waits = new ArrayList<>();
        for (int i = 1; i < recs.size(); i++) {
            long h = Math.max(0, recs.get(i).acquired() - recs.get(i - 1).released());
            hand.add(h);
            if (recs.get(i).task() != recs.get(i - 1).task()) {
                cross.add(h);
            }
        }
        long[] perTask = new long[threads];
        for (Rec r : recs) {
            waits.add(r.acquired() - r.called());
            perTask[r.task()]++;
        }
        long min = Arrays.stream(perTask).min().orElse(0);
        long max = Arrays.stream(perTask).max().orElse(0);
        long[] h = sorted(hand);
        long[] c = sorted(cross);
        long[] w = sorted(waits);
        double secs = took / 1e9;
        return "{\"ops\":" + recs.size() + ",\"seconds\":" + num(secs) + ",\"ops_per_s\":" + num(recs.size() / secs)
                + ",\"p50_us\":" + pct(h, 50) + ",\"p99_us\":" + pct(h, 99) + ",\"tasks\":" + threads
                + ",\"cross_handoffs\":" + c.length + ",\"cross_handoffs_per_s\":" + num(c.length / secs)
                + ",\"cross_p50_us\":" + pct(c, 50) + ",\"cross_p99_us\":" + pct(c, 99)
                + ",\"acquire_wait_p50_us\":" + pct(w, 50) + ",\"acquire_wait_p99_us\":" + pct(w, 99)
                + ",\"per_task_min\":" + min + ",\"per_task_max\":" + max
                + ",\"per_task_min_max_ratio\":" + num(max == 0 ? 0.0 : (double) min / max)
                + ",\"violations\":" + violations.get() + "}";
    }

    private static void w7(RedissonClient client, BufferedReader in, String name, long warmup) throws Exception {
        RLock own = client.getLock(name + ":warmup:" + ProcessHandle.current().pid());
        for (long i = 0; i < warmup; i++) {
            own.lock();
            own.unlock();
        }
        RLock lock = client.getLock(name);
        say("ready");
        String go = in.readLine();
        if (go == null || !go.startsWith("go ")) {
            throw new IllegalStateException("W7 child: expected \"go END\", got " + go);
        }
        long end = Long.parseLong(go.substring(3).trim());
        List<long[]> recs = new ArrayList<>();
        while (System.nanoTime() < end) {
            long called = System.nanoTime();
            lock.lock();
            long acquired = System.nanoTime();
            Thread.yield();
            long released = System.nanoTime();
            lock.unlock();
            recs.add(new long[] {called, acquired, released});
        }
        StringBuilder text = new StringBuilder(recs.size() * 64);
        for (long[] r : recs) {
            text.append(r[0]).append(' ').append(r[1]).append(' ').append(r[2]).append('\n');
        }
        text.append("done");
        say(text.toString());
        // Stay connected (and idle) until the parent has read the master's counters.
        while (in.readLine() != null) {
            // nothing
        }
    }
}
