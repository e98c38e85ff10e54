package redlatch.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.RedissonMultiLock;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;
import org.redisson.config.SentinelServersConfig;

/**
 * The Java side of redlatch's interop tests: one Redisson client driven over stdin/stdout.
 *
 * <p>Every command line is {@code ID THREAD OP ARGS...}; it runs on the worker thread named
 * THREAD (created on first use, one OS thread each, kept for the life of the process),
 * because Redisson ties lock holds to the Java thread. Commands on different threads run
 * concurrently; commands on one thread run in order. Every reply is one line
 * {@code ID NANOS OUTCOME...}, NANOS being {@code System.nanoTime()} (CLOCK_MONOTONIC on
 * Linux) taken right after the Redisson call returned (for {@code unlock}-like calls:
 * also {@code before=NANOS} right before the call). OUTCOME is {@code ok}, {@code true},
 * {@code false}, {@code val X} or {@code err CLASS: MESSAGE}.
 *
 * <p>Operations (THREAD is any word; {@code -} for process-wide ones):
 * <ul>
 *   <li>{@code connect single|cluster|sentinel ADDRS [key=value...]} (process-wide):
 *       ADDRS comma-separated {@code host:port}; for sentinel the first item is the master
 *       name. Keys: {@code watchdog=MS} (lockWatchdogTimeout), {@code synced=true|false}
 *       (checkLockSyncedSlaves), {@code syncms=MS} (slavesSyncTimeout),
 *       {@code sharded=AUTO|ON|OFF} (cluster subscription mode), {@code fairwait=MS}
 *       (fairLockWaitTimeout). Replies {@code val CLIENT_ID}. Connecting again shuts the
 *       previous client down and starts a new one.</li>
 *   <li>{@code holder}: {@code val CLIENT_ID:THREAD_ID}, this thread's field in a lock hash.</li>
 *   <li>{@code lock KIND NAME [LEASE_MS]}, {@code trylock KIND NAME WAIT_MS [LEASE_MS]},
 *       {@code unlock KIND NAME}, {@code forceunlock KIND NAME}, {@code islocked KIND NAME},
 *       {@code holdcount KIND NAME}, {@code isheld KIND NAME}, {@code ttl KIND NAME}:
 *       KIND is {@code lock}, {@code fair}, {@code fenced}, {@code nonreentrant},
 *       {@code nonreentrantfair}, {@code spin} (Redisson 4.4+), {@code read} or {@code write}
 *       (of {@code getReadWriteLock(NAME)}); {@code fenced} lock/trylock reply the token.</li>
 *   <li>{@code multi lock|trylock|unlock NAMES [WAIT_MS]}: RedissonMultiLock over the plain
 *       locks NAMES (comma-separated).</li>
 *   <li>{@code group lock|trylock|unlock|islocked|isheld|forceunlock GROUP VALUES [WAIT_MS]
 *       [LEASE_MS]}: the faster multi-lock {@code getMultiLock(GROUP, VALUES)} (Redisson 4.x;
 *       VALUES comma-separated strings); connect with {@code codec=string} so a string is
 *       encoded as its UTF-8 bytes, as redlatch hashes it.</li>
 *   <li>{@code sem NAME trysetpermits|acquire|release|available [N] [WAIT_MS]} (tryacquire
 *       N WAIT_MS).</li>
 *   <li>{@code xsem NAME trysetpermits N | acquire [LEASE_MS] | tryacquire WAIT_MS [LEASE_MS]
 *       | release ID | tryrelease ID | available}.</li>
 *   <li>{@code latch NAME trysetcount N | countdown | await MS | count}.</li>
 *   <li>{@code parked THREAD} (run it on another thread, e.g. {@code -}): {@code true} when
 *       worker THREAD is blocked on a {@code java.util.concurrent.Semaphore}, which is where
 *       Redisson's blocking lock calls sleep until a release message (RedissonLockEntry's
 *       latch). A test that needs a Java waiter asleep before it releases waits for this:
 *       Redisson wakes readers with {@code release(getQueueLength())}, so a read-unlock
 *       message that arrives before the thread is queued on that semaphore wakes nobody.</li>
 *   <li>{@code shutdown} (process-wide): shuts the client down and exits 0.</li>
 * </ul>
 */
public final class Driver {
    private static final PrintStream OUT =
            new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final Map<String, ExecutorService> THREADS = new ConcurrentHashMap<>();
    private static volatile RedissonClient client;

    private Driver() {}

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        reply("-", System.nanoTime(), "ready " + Redisson.class.getPackage().getImplementationVersion());
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] w = line.split("\\s+");
            if (w.length < 3) {
                reply(w[0], System.nanoTime(), "err IllegalArgumentException: want ID THREAD OP ARGS");
                continue;
            }
            String id = w[0];
            String thread = w[1];
            String[] cmd = java.util.Arrays.copyOfRange(w, 2, w.length);
            ExecutorService worker = THREADS.computeIfAbsent(thread, t -> Executors.newSingleThreadExecutor(r -> {
                Thread th = new Thread(r, "driver-" + t);
                th.setDaemon(true);
                return th;
            }));
            worker.execute(() -> run(id, cmd));
        }
        // stdin closed: the test is gone.
        if (client != null) {
            client.shutdown();
        }
        System.exit(0);
    }

    private static void reply(String id, long nanos, String outcome) {
        synchronized (OUT) {
            OUT.println(id + " " + nanos + " " + outcome);
            OUT.flush();
        }
    }

    private static void run(String id, String[] cmd) {
        String outcome;
        try {
            outcome = dispatch(id, cmd);
        } catch (Throwable e) {
            Throwable cause = e;
            while (cause instanceof InvocationTargetException && cause.getCause() != null) {
                cause = cause.getCause();
            }
            String msg = String.valueOf(cause.getMessage()).replace('\n', ' ').replace('\r', ' ');
            outcome = "err " + cause.getClass().getSimpleName() + ": " + msg;
        }
        if (outcome != null) {
            reply(id, System.nanoTime(), outcome);
        }
    }

    private static String bool(boolean b) {
        return b ? "true" : "false";
    }

    private static long arg(String[] cmd, int i, long dflt) {
        return cmd.length > i ? Long.parseLong(cmd[i]) : dflt;
    }

    private static String dispatch(String id, String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "connect":
                return connect(cmd);
            case "shutdown":
                if (client != null) {
                    client.shutdown();
                }
                reply(id, System.nanoTime(), "ok");
                System.exit(0);
                return null;
            case "holder":
                return "val " + client.getId() + ":" + Thread.currentThread().getId();
            case "parked":
                return bool(parked("driver-" + cmd[1]));
            case "multi":
                return multi(id, cmd);
            case "group":
                return group(cmd);
            case "sem":
                return semaphore(cmd);
            case "xsem":
                return expirable(cmd);
            case "latch":
                return latch(cmd);
            default:
                return lock(id, cmd);
        }
    }

    /**
     * Whether the thread named {@code name} is blocked on a {@link java.util.concurrent.Semaphore}
     * (queued on it, so a release counts it). One {@link java.lang.management.ThreadInfo}
     * snapshot gives the state and the object blocked on together.
     */
    private static boolean parked(String name) {
        java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (!t.getName().equals(name)) {
                continue;
            }
            java.lang.management.ThreadInfo info = mx.getThreadInfo(t.getId());
            if (info == null) {
                return false;
            }
            Thread.State state = info.getThreadState();
            String on = String.valueOf(info.getLockName());
            return (state == Thread.State.WAITING || state == Thread.State.TIMED_WAITING)
                    && on.startsWith("java.util.concurrent.Semaphore$");
        }
        return false;
    }

    private static String connect(String[] cmd) throws Exception {
        // Connecting again starts a new Redisson client (as a new JVM would: 3.27 probes
        // for sharded pub/sub once per client); the previous one is shut down first.
        if (client != null) {
            client.shutdown();
            client = null;
        }
        String mode = cmd[1];
        String[] addrs = cmd[2].split(",");
        Config config = new Config();
        Map<String, String> opts = new ConcurrentHashMap<>();
        for (int i = 3; i < cmd.length; i++) {
            String[] kv = cmd[i].split("=", 2);
            opts.put(kv[0], kv[1]);
        }
        switch (mode) {
            case "single":
                config.useSingleServer().setAddress("redis://" + addrs[0]).setConnectionMinimumIdleSize(2)
                        .setSubscriptionConnectionMinimumIdleSize(1);
                break;
            case "cluster": {
                ClusterServersConfig c = config.useClusterServers();
                for (String a : addrs) {
                    c.addNodeAddress("redis://" + a);
                }
                c.setReadMode(ReadMode.MASTER).setScanInterval(500).setMasterConnectionMinimumIdleSize(2)
                        .setSlaveConnectionMinimumIdleSize(1).setSubscriptionConnectionMinimumIdleSize(1);
                if (opts.containsKey("sharded")) {
                    Method m = find(c.getClass(), "setShardedSubscriptionMode");
                    Class<?> type = m.getParameterTypes()[0];
                    m.invoke(c, enumValue(type, opts.get("sharded")));
                }
                break;
            }
            case "sentinel": {
                SentinelServersConfig c = config.useSentinelServers().setMasterName(addrs[0]);
                for (int i = 1; i < addrs.length; i++) {
                    c.addSentinelAddress("redis://" + addrs[i]);
                }
                c.setReadMode(ReadMode.MASTER).setCheckSentinelsList(false).setScanInterval(500)
                        .setMasterConnectionMinimumIdleSize(2).setSlaveConnectionMinimumIdleSize(1)
                        .setSubscriptionConnectionMinimumIdleSize(1);
                break;
            }
            default:
                throw new IllegalArgumentException("unknown deployment " + mode);
        }
        if (opts.containsKey("watchdog")) {
            config.setLockWatchdogTimeout(Long.parseLong(opts.get("watchdog")));
        }
        if (opts.containsKey("synced")) {
            find(Config.class, "setCheckLockSyncedSlaves").invoke(config, Boolean.parseBoolean(opts.get("synced")));
        }
        if (opts.containsKey("syncms")) {
            find(Config.class, "setSlavesSyncTimeout").invoke(config, Long.parseLong(opts.get("syncms")));
        }
        if (opts.containsKey("fairwait")) {
            find(Config.class, "setFairLockWaitTimeout").invoke(config, Long.parseLong(opts.get("fairwait")));
        }
        if ("string".equals(opts.get("codec"))) {
            config.setCodec(org.redisson.client.codec.StringCodec.INSTANCE);
        }
        client = Redisson.create(config);
        return "val " + client.getId();
    }

    /**
     * A one-argument setter of this Redisson version by name (some exist only in some
     * versions); a primitive or enum parameter is preferred over an options object.
     */
    private static Method find(Class<?> type, String name) {
        for (Method m : type.getMethods()) {
            Class<?> p = m.getParameterTypes().length == 1 ? m.getParameterTypes()[0] : null;
            if (m.getName().equals(name) && p != null && (p.isPrimitive() || p.isEnum())) {
                return m;
            }
        }
        throw new UnsupportedOperationException(name + " not in this Redisson version");
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static Object enumValue(Class<?> type, String name) {
        return Enum.valueOf((Class<? extends Enum>) type, name);
    }

    private static RLock rlock(String kind, String name) throws Exception {
        switch (kind) {
            case "lock":
                return client.getLock(name);
            case "fair":
                return client.getFairLock(name);
            case "fenced":
                return (RLock) RedissonClient.class.getMethod("getFencedLock", String.class).invoke(client, name);
            // Redisson 4.4+ only (reflection: the driver also builds against 3.x).
            case "nonreentrant":
                return (RLock) RedissonClient.class.getMethod("getNonReentrantLock", String.class).invoke(client, name);
            case "nonreentrantfair":
                return (RLock) RedissonClient.class.getMethod("getNonReentrantFairLock", String.class).invoke(client, name);
            case "spin":
                return (RLock) RedissonClient.class.getMethod("getSpinLock", String.class).invoke(client, name);
            case "read":
                return client.getReadWriteLock(name).readLock();
            case "write":
                return client.getReadWriteLock(name).writeLock();
            default:
                throw new IllegalArgumentException("unknown lock kind " + kind);
        }
    }

    private static String lock(String id, String[] cmd) throws Exception {
        String op = cmd[0];
        String kind = cmd[1];
        RLock lock = rlock(kind, cmd[2]);
        boolean fenced = kind.equals("fenced");
        switch (op) {
            case "lock": {
                long lease = arg(cmd, 3, -1);
                if (fenced) {
                    Object token = lease < 0
                            ? lock.getClass().getMethod("lockAndGetToken").invoke(lock)
                            : lock.getClass().getMethod("lockAndGetToken", long.class, TimeUnit.class)
                                    .invoke(lock, lease, TimeUnit.MILLISECONDS);
                    return "val " + token;
                }
                if (lease < 0) {
                    lock.lock();
                } else {
                    lock.lock(lease, TimeUnit.MILLISECONDS);
                }
                return "ok";
            }
            case "trylock": {
                long wait = arg(cmd, 3, 0);
                long lease = arg(cmd, 4, -1);
                if (fenced) {
                    Object token = lock.getClass()
                            .getMethod("tryLockAndGetToken", long.class, long.class, TimeUnit.class)
                            .invoke(lock, wait, lease, TimeUnit.MILLISECONDS);
                    return token == null ? "false" : "val " + token;
                }
                return bool(lock.tryLock(wait, lease, TimeUnit.MILLISECONDS));
            }
            case "unlock": {
                long before = System.nanoTime();
                lock.unlock();
                return "ok before=" + before;
            }
            case "forceunlock": {
                long before = System.nanoTime();
                return bool(lock.forceUnlock()) + " before=" + before;
            }
            case "islocked":
                return bool(lock.isLocked());
            case "isheld":
                return bool(lock.isHeldByCurrentThread());
            case "holdcount":
                return "val " + lock.getHoldCount();
            case "ttl":
                return "val " + lock.remainTimeToLive();
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }

    private static String multi(String id, String[] cmd) throws Exception {
        String op = cmd[1];
        List<RLock> locks = new ArrayList<>();
        for (String n : cmd[2].split(",")) {
            locks.add(client.getLock(n));
        }
        RedissonMultiLock multi = new RedissonMultiLock(locks.toArray(new RLock[0]));
        switch (op) {
            case "lock":
                multi.lock();
                return "ok";
            case "trylock":
                return bool(multi.tryLock(arg(cmd, 3, 0), -1, TimeUnit.MILLISECONDS));
            case "unlock": {
                long before = System.nanoTime();
                multi.unlock();
                return "ok before=" + before;
            }
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }

    /** The faster multi-lock, by reflection: the driver builds against Redisson 3.27 too. */
    private static String group(String[] cmd) throws Exception {
        String op = cmd[1];
        java.util.Collection<Object> values = new ArrayList<>(Arrays.asList((Object[]) cmd[3].split(",")));
        RLock lock = (RLock) RedissonClient.class
                .getMethod("getMultiLock", String.class, java.util.Collection.class)
                .invoke(client, cmd[2], values);
        switch (op) {
            case "lock": {
                long lease = arg(cmd, 4, -1);
                if (lease < 0) {
                    lock.lock();
                } else {
                    lock.lock(lease, TimeUnit.MILLISECONDS);
                }
                return "ok";
            }
            case "trylock":
                return bool(lock.tryLock(arg(cmd, 4, 0), arg(cmd, 5, -1), TimeUnit.MILLISECONDS));
            case "unlock": {
                long before = System.nanoTime();
                lock.unlock();
                return "ok before=" + before;
            }
            case "islocked":
                return bool(lock.isLocked());
            case "isheld":
                return bool(lock.isHeldByCurrentThread());
            case "forceunlock":
                return bool(lock.forceUnlock());
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }

    private static String semaphore(String[] cmd) throws Exception {
        RSemaphore sem = client.getSemaphore(cmd[1]);
        String op = cmd[2];
        switch (op) {
            case "trysetpermits":
                return bool(sem.trySetPermits((int) arg(cmd, 3, 1)));
            case "acquire":
                sem.acquire((int) arg(cmd, 3, 1));
                return "ok";
            case "tryacquire":
                return bool(sem.tryAcquire((int) arg(cmd, 3, 1), arg(cmd, 4, 0), TimeUnit.MILLISECONDS));
            case "release": {
                long before = System.nanoTime();
                sem.release((int) arg(cmd, 3, 1));
                return "ok before=" + before;
            }
            case "available":
                return "val " + sem.availablePermits();
            case "drain":
                return "val " + sem.drainPermits();
            // Newer methods by reflection: the driver builds against Redisson 3.27 too.
            case "releaseifexists": {
                Method m = RSemaphore.class.getMethod("releaseIfExists", int.class);
                long before = System.nanoTime();
                return bool((Boolean) m.invoke(sem, (int) arg(cmd, 3, 1))) + " before=" + before;
            }
            case "trysetpermitsttl": {
                Method m = RSemaphore.class.getMethod("trySetPermits", int.class, Duration.class);
                return bool((Boolean) m.invoke(sem, (int) arg(cmd, 3, 1), Duration.ofMillis(arg(cmd, 4, 1))));
            }
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }

    @SuppressWarnings("unchecked")
    private static String expirable(String[] cmd) throws Exception {
        RPermitExpirableSemaphore sem = client.getPermitExpirableSemaphore(cmd[1]);
        String op = cmd[2];
        switch (op) {
            case "trysetpermits":
                return bool(sem.trySetPermits((int) arg(cmd, 3, 1)));
            case "acquire": {
                long lease = arg(cmd, 3, -1);
                return "val " + (lease < 0 ? sem.acquire() : sem.acquire(lease, TimeUnit.MILLISECONDS));
            }
            case "tryacquire": {
                long wait = arg(cmd, 3, 0);
                long lease = arg(cmd, 4, -1);
                String permit = lease < 0
                        ? sem.tryAcquire(wait, TimeUnit.MILLISECONDS)
                        : sem.tryAcquire(wait, lease, TimeUnit.MILLISECONDS);
                return permit == null ? "false" : "val " + permit;
            }
            case "release": {
                long before = System.nanoTime();
                sem.release(cmd[3]);
                return "ok before=" + before;
            }
            case "tryrelease": {
                long before = System.nanoTime();
                return bool(sem.tryRelease(cmd[3])) + " before=" + before;
            }
            case "available":
                return "val " + sem.availablePermits();
            case "acquired":
                return "val " + call(sem, "acquiredPermits");
            case "permits":
                return "val " + call(sem, "getPermits");
            case "setpermits":
                RPermitExpirableSemaphore.class.getMethod("setPermits", int.class).invoke(sem, (int) arg(cmd, 3, 1));
                return "ok";
            // acquiren N [LEASE]: N permits at once; "val ID,ID,..."
            case "acquiren": {
                int n = (int) arg(cmd, 3, 1);
                long lease = arg(cmd, 4, -1);
                Object ids = lease < 0
                        ? RPermitExpirableSemaphore.class.getMethod("acquire", int.class).invoke(sem, n)
                        : RPermitExpirableSemaphore.class.getMethod("acquire", int.class, long.class, TimeUnit.class)
                                .invoke(sem, n, lease, TimeUnit.MILLISECONDS);
                return "val " + String.join(",", (List<String>) ids);
            }
            // tryreleaselist ID,ID,...: "val N" permits given back (all or none)
            case "tryreleaselist": {
                Method m = RPermitExpirableSemaphore.class.getMethod("tryRelease", List.class);
                long before = System.nanoTime();
                return "val " + m.invoke(sem, Arrays.asList(cmd[3].split(","))) + " before=" + before;
            }
            case "leasetime":
                return "val " + RPermitExpirableSemaphore.class.getMethod("getLeaseTime", String.class).invoke(sem, cmd[3]);
            case "updatelease": {
                Method m = RPermitExpirableSemaphore.class.getMethod("updateLeaseTime", String.class, long.class,
                        TimeUnit.class);
                return bool((Boolean) m.invoke(sem, cmd[3], arg(cmd, 4, 1), TimeUnit.MILLISECONDS));
            }
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }

    private static Object call(Object target, String method) throws Exception {
        return target.getClass().getMethod(method).invoke(target);
    }

    private static String latch(String[] cmd) throws Exception {
        RCountDownLatch latch = client.getCountDownLatch(cmd[1]);
        String op = cmd[2];
        switch (op) {
            case "trysetcount":
                return bool(latch.trySetCount(arg(cmd, 3, 1)));
            case "countdown": {
                long before = System.nanoTime();
                latch.countDown();
                return "ok before=" + before;
            }
            case "await":
                return bool(latch.await(arg(cmd, 3, 0), TimeUnit.MILLISECONDS));
            case "count":
                return "val " + latch.getCount();
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }
}
