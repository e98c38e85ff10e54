//! Latency samples and percentiles.

use std::time::Duration;

/// Latency samples in microseconds.
#[derive(Default)]
pub struct Samples(Vec<u64>);

impl Samples {
    pub fn with_capacity(n: usize) -> Self {
        Samples(Vec::with_capacity(n))
    }

    pub fn push(&mut self, d: Duration) {
        self.0.push(d.as_micros() as u64);
    }

    pub fn extend(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The p-th percentile (0–100), nearest rank; 0 when empty.
    pub fn percentile(&mut self, p: f64) -> u64 {
        if self.0.is_empty() {
            return 0;
        }
        self.0.sort_unstable();
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1]
    }
}

/// The process's user + system CPU time so far.
pub fn process_cpu() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let tv = |t: nix::sys::time::TimeVal| {
                Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
            };
            tv(u.user_time()) + tv(u.system_time())
        }
        Err(_) => Duration::ZERO,
    }
}

/// W1's timed pairs gathered over one or more blocks (the peers run interleaves the
/// blocks of two libraries, so that the machine's drift weighs on both alike): the
/// latencies, the wall time and this process's CPU time inside the blocks.
#[derive(Default)]
pub struct Tally {
    pub samples: Samples,
    pub took: Duration,
    pub cpu: Duration,
}

/// When a block started: the clock and this process's CPU time.
pub struct Mark(std::time::Instant, Duration);

impl Tally {
    /// Starts timing a block.
    pub fn begin(&self) -> Mark {
        Mark(std::time::Instant::now(), process_cpu())
    }

    /// Ends the block started at `mark`.
    pub fn end(&mut self, mark: Mark) {
        self.took += mark.0.elapsed();
        self.cpu += process_cpu().saturating_sub(mark.1);
    }

    /// The client's CPU per pair over every block, in microseconds.
    pub fn cpu_us_per_pair(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.samples.len().max(1) as f64
    }
}

/// Resident set size of this process in bytes (Linux).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut s = Samples::default();
        for us in 1..=100 {
            s.push(Duration::from_micros(us));
        }
        assert_eq!(s.percentile(50.0), 50);
        assert_eq!(s.percentile(99.0), 99);
        assert_eq!(s.percentile(100.0), 100);
        assert_eq!(Samples::default().percentile(50.0), 0);
    }
}
