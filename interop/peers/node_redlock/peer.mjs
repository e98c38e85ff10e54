// node-redlock (`redlock` from npm, installed into target/peers/node by the test kit:
// redlatch-testkit/src/foreign.rs) contending for one simple-lock name beside redlatch.
//
//   node peer.mjs PORT NAME SECONDS INSIDE_KEY
//
// For SECONDS: acquire NAME for 10 s (retried every 2-10 ms), INCR INSIDE_KEY (more
// than 1: someone else is inside too, an overlap), hold 2 ms, DECR, release (a release
// that finds the lock gone throws: exit 1). Prints `entered N overlaps M`.
import Redis from "ioredis";
import Redlock from "redlock";

const [port, name, seconds, inside] = process.argv.slice(2);
const client = new Redis({ port: Number(port), host: "127.0.0.1", commandTimeout: 30000 });
const redlock = new Redlock([client], { retryCount: 20, retryDelay: 6, retryJitter: 4 });
const deadline = Date.now() + Number(seconds) * 1000;
let entered = 0;
let overlaps = 0;
while (Date.now() < deadline) {
  let lock;
  try {
    lock = await redlock.acquire([name], 10000);
  } catch (e) {
    continue;
  }
  if ((await client.incr(inside)) !== 1) overlaps++;
  await new Promise((r) => setTimeout(r, 2));
  await client.decr(inside);
  // A release that finds the lock gone (another token, or none) is refused by a
  // majority: redlock throws an ExecutionError, and the process exits 1.
  await lock.release();
  entered++;
}
console.log(`entered ${entered} overlaps ${overlaps}`);
client.disconnect();
