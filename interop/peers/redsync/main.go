// go-redsync v4 (from the Go module proxy, built into target/peers/go by the test kit:
// redlatch-testkit/src/foreign.rs) contending for one simple-lock name beside redlatch.
//
//	redsync-peer PORT NAME SECONDS INSIDE_KEY
//
// For SECONDS: take NAME with a Mutex (expiry 10 s, retried every 2-10 ms), INCR
// INSIDE_KEY (more than 1: someone else is inside too, an overlap), hold 2 ms, DECR,
// unlock (an unlock that finds the lock gone: exit 3). Prints `entered N overlaps M`.
package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

func main() {
	port, name, inside := os.Args[1], os.Args[2], os.Args[4]
	seconds, err := strconv.ParseFloat(os.Args[3], 64)
	if err != nil {
		panic(err)
	}
	client := goredislib.NewClient(&goredislib.Options{
		Addr:        "127.0.0.1:" + port,
		ReadTimeout: 30 * time.Second,
	})
	rs := redsync.New(goredis.NewPool(client))
	ctx := context.Background()
	deadline := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	entered, overlaps := 0, 0
	for time.Now().Before(deadline) {
		m := rs.NewMutex(name,
			redsync.WithExpiry(10*time.Second),
			redsync.WithTries(20),
			redsync.WithRetryDelayFunc(func(int) time.Duration {
				return time.Duration(2+rand.Intn(9)) * time.Millisecond
			}))
		if err := m.LockContext(ctx); err != nil {
			continue
		}
		n, err := client.Incr(ctx, inside).Result()
		if err != nil {
			panic(err)
		}
		if n != 1 {
			overlaps++
		}
		time.Sleep(2 * time.Millisecond)
		client.Decr(ctx, inside)
		if ok, err := m.UnlockContext(ctx); !ok || err != nil {
			fmt.Fprintln(os.Stderr, "unlock found the lock gone:", err)
			os.Exit(3)
		}
		entered++
	}
	fmt.Printf("entered %d overlaps %d\n", entered, overlaps)
}
