//! [`BackOff`]: how long a spin lock's waiter sleeps between attempts (Redisson's
//! `LockOptions.BackOff`), and the sequence of sleeps it gives ([`Delays`]).

use std::time::Duration;

use crate::error::{Error, Result};

/// How a [spin lock](crate::Client::spin_lock)'s waiter spaces its attempts: it never
/// subscribes to anything, it tries, sleeps, and tries again. The sleeps start at an
/// initial delay and grow by a multiplier, plus a random jitter of up to `n - 1`
/// milliseconds after the `n`-th refused attempt, until they reach the maximum delay,
/// where they stay. A constant back-off is the case where initial and maximum are equal.
///
/// This is Redisson's `LockOptions.BackOff`: [`BackOff::default`] is its
/// `LockOptions.defaults()` (exponential: 1 ms, ×2, at most 128 ms), and
/// [`BackOff::constant`] its `ConstantBackOff` (64 ms in Redisson's default).
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use redlatch::BackOff;
///
/// let exp = BackOff::exponential(Duration::from_millis(2), Duration::from_millis(50), 3)?;
/// let sleeps: Vec<Duration> = exp.delays().take(6).collect();
/// assert_eq!(sleeps[0], Duration::from_millis(2));
/// assert!(sleeps.windows(2).all(|w| w[0] <= w[1])); // never shrinking …
/// assert!(sleeps.iter().all(|d| *d <= Duration::from_millis(50))); // … nor above the max
/// assert_eq!(sleeps[5], Duration::from_millis(50));
///
/// let flat = BackOff::constant(Duration::from_millis(64))?;
/// assert!(flat.delays().take(10).all(|d| d == Duration::from_millis(64)));
///
/// // Bad input is a typed error, never a panic:
/// assert!(BackOff::exponential(Duration::ZERO, Duration::from_millis(5), 2).is_err());
/// assert!(BackOff::constant(Duration::ZERO).is_err());
/// # Ok::<(), redlatch::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackOff {
    initial: Duration,
    max: Duration,
    multiplier: u32,
}

impl Default for BackOff {
    /// Redisson's default: exponential from 1 ms, ×2, at most 128 ms.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::BackOff;
    /// let b = BackOff::default();
    /// assert_eq!(b.initial_delay(), Duration::from_millis(1));
    /// assert_eq!(b.max_delay(), Duration::from_millis(128));
    /// assert_eq!(b.multiplier(), 2);
    /// ```
    fn default() -> Self {
        BackOff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
            multiplier: 2,
        }
    }
}

impl BackOff {
    /// An exponential back-off: `initial`, then each sleep `multiplier` times the last
    /// plus jitter, at most `max`. Every argument must be positive and `max` at least
    /// `initial`, else [`Error::Config`] names the one at fault.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::{BackOff, Error};
    /// let b = BackOff::exponential(Duration::from_millis(5), Duration::from_millis(200), 2)?;
    /// assert_eq!(b.max_delay(), Duration::from_millis(200));
    /// let err = BackOff::exponential(Duration::from_millis(5), Duration::from_millis(1), 2)
    ///     .unwrap_err();
    /// assert!(matches!(err, Error::Config { ref reason, .. } if reason.contains("max")));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn exponential(initial: Duration, max: Duration, multiplier: u32) -> Result<BackOff> {
        let bad = |what: &str| Err(Error::config(format!("spin lock back-off: {what}")));
        if initial.is_zero() {
            return bad("the initial delay must be positive");
        }
        if max < initial {
            return bad("the max delay must be at least the initial delay");
        }
        if multiplier == 0 {
            return bad("the multiplier must be positive");
        }
        Ok(BackOff {
            initial,
            max,
            multiplier,
        })
    }

    /// A constant back-off: every sleep is `delay` (positive, else [`Error::Config`]).
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::BackOff;
    /// let b = BackOff::constant(Duration::from_millis(64))?;
    /// assert_eq!(b.initial_delay(), b.max_delay());
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    pub fn constant(delay: Duration) -> Result<BackOff> {
        if delay.is_zero() {
            return Err(Error::config(
                "spin lock back-off: the delay must be positive",
            ));
        }
        Ok(BackOff {
            initial: delay,
            max: delay,
            multiplier: 1,
        })
    }

    /// The first sleep.
    ///
    /// # Examples
    /// ```
    /// assert_eq!(redlatch::BackOff::default().initial_delay().as_millis(), 1);
    /// ```
    pub fn initial_delay(&self) -> Duration {
        self.initial
    }

    /// The longest sleep.
    ///
    /// # Examples
    /// ```
    /// assert_eq!(redlatch::BackOff::default().max_delay().as_millis(), 128);
    /// ```
    pub fn max_delay(&self) -> Duration {
        self.max
    }

    /// The factor each sleep grows by.
    ///
    /// # Examples
    /// ```
    /// assert_eq!(redlatch::BackOff::default().multiplier(), 2);
    /// ```
    pub fn multiplier(&self) -> u32 {
        self.multiplier
    }

    /// The sleeps one wait would take, in order (endless): a fresh sequence per wait,
    /// as Redisson creates a policy per acquisition.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// let mut sleeps = redlatch::BackOff::default().delays();
    /// assert_eq!(sleeps.next(), Some(Duration::from_millis(1)));
    /// assert!(sleeps.take(20).all(|d| d <= Duration::from_millis(128)));
    /// ```
    pub fn delays(&self) -> Delays {
        Delays {
            next: self.initial,
            max: self.max,
            multiplier: self.multiplier,
            refused: 0,
        }
    }
}

/// The sleeps of one spin wait ([`BackOff::delays`]): an endless iterator.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// let b = redlatch::BackOff::constant(Duration::from_millis(3))?;
/// let total: Duration = b.delays().take(4).sum();
/// assert_eq!(total, Duration::from_millis(12));
/// # Ok::<(), redlatch::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Delays {
    next: Duration,
    max: Duration,
    multiplier: u32,
    refused: u64,
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        if now >= self.max {
            return Some(self.max);
        }
        // After the n-th refusal: grow, plus 0..n-1 ms of jitter so that waiters refused
        // together drift apart; capped at the max.
        self.refused += 1;
        let jitter = Duration::from_millis(rand::random_range(0..self.refused));
        self.next = now
            .saturating_mul(self.multiplier)
            .saturating_add(jitter)
            .min(self.max);
        Some(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_the_multiplier_with_bounded_jitter_then_stays_at_max() {
        let ms = Duration::from_millis;
        let b = BackOff::exponential(ms(4), ms(1000), 3).unwrap();
        let d: Vec<Duration> = b.delays().take(12).collect();
        assert_eq!(d[0], ms(4));
        for (n, w) in d.windows(2).enumerate() {
            // After the (n+1)-th refusal: ×3 plus at most n ms, capped.
            let low = (w[0] * 3).min(ms(1000));
            let high = (w[0] * 3 + ms(n as u64)).min(ms(1000));
            assert!(w[1] >= low && w[1] <= high, "{n}: {:?} -> {:?}", w[0], w[1]);
        }
        assert_eq!(*d.last().unwrap(), ms(1000));
    }

    #[test]
    fn a_multiplier_of_one_without_jitter_is_constant() {
        let b = BackOff::constant(Duration::from_millis(7)).unwrap();
        assert!(b.delays().take(50).all(|d| d == Duration::from_millis(7)));
    }

    #[test]
    fn bad_input_is_typed() {
        let ms = Duration::from_millis;
        for bad in [
            BackOff::exponential(ms(0), ms(10), 2),
            BackOff::exponential(ms(5), ms(4), 2),
            BackOff::exponential(ms(5), ms(10), 0),
            BackOff::constant(ms(0)),
        ] {
            assert!(matches!(bad, Err(Error::Config { .. })), "{bad:?}");
        }
    }
}
