//! [`Packed`]: a script call's keys or arguments in one buffer. Group commit builds
//! calls of hundreds of arguments (seven per operation); one allocation each, and
//! the copy of each into the command, were a tenth of the client's CPU per W2 pair
//! (BENCHMARKS.md). Here every argument is written end to end into one byte buffer
//! and only where each ends is recorded.

use std::io;

use redis::RedisWrite;

/// Arguments end to end in one buffer: `data[ends[i - 1]..ends[i]]` is argument `i`.
#[derive(Debug, Default)]
pub(crate) struct Packed {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Packed {
    /// Room for `args` arguments of `bytes` bytes in all.
    pub(crate) fn with_capacity(args: usize, bytes: usize) -> Self {
        Packed {
            data: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(args),
        }
    }

    /// Room for `args` more arguments of `bytes` bytes in all.
    pub(crate) fn reserve(&mut self, args: usize, bytes: usize) {
        self.data.reserve(bytes);
        self.ends.reserve(args);
    }

    /// How many arguments.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Their bytes, all together.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The first argument.
    pub(crate) fn first(&self) -> Option<&[u8]> {
        self.ends.first().map(|&end| &self.data[..end])
    }

    /// The arguments in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.data[start..end])
    }
}

/// Ends the argument being written when dropped ([`RedisWrite::writer_for_next_arg`]).
struct NextArg<'a>(&'a mut Packed);

impl io::Write for NextArg<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.data.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for NextArg<'_> {
    fn drop(&mut self) {
        self.0.ends.push(self.0.data.len());
    }
}

impl RedisWrite for Packed {
    fn write_arg(&mut self, arg: &[u8]) {
        self.data.extend_from_slice(arg);
        self.ends.push(self.data.len());
    }

    fn write_arg_fmt(&mut self, arg: impl std::fmt::Display) {
        use std::io::Write;
        write!(self.data, "{arg}").expect("writing to a Vec cannot fail");
        self.ends.push(self.data.len());
    }

    fn writer_for_next_arg(&mut self) -> impl io::Write + '_ {
        NextArg(self)
    }

    fn reserve_space_for_args(&mut self, additional: impl IntoIterator<Item = usize>) {
        let (mut bytes, mut args) = (0, 0);
        for len in additional {
            bytes += len;
            args += 1;
        }
        self.data.reserve(bytes);
        self.ends.reserve(args);
    }
}

#[cfg(test)]
mod tests {
    use redis::ToRedisArgs;

    use super::*;

    #[test]
    fn arguments_come_back_in_order_and_whole() {
        let mut p = Packed::default();
        "lock".write_redis_args(&mut p);
        30_000u64.write_redis_args(&mut p);
        "".write_redis_args(&mut p);
        {
            use std::io::Write;
            let mut w = p.writer_for_next_arg();
            w.write_all(b"redlatch_lock_waiters:").unwrap();
            w.write_all(b"{lock}").unwrap();
        }
        let all: Vec<&[u8]> = p.iter().collect();
        assert_eq!(
            all,
            [&b"lock"[..], b"30000", b"", b"redlatch_lock_waiters:{lock}"]
        );
        assert_eq!((p.len(), p.first()), (4, Some(&b"lock"[..])));
        assert_eq!(p.bytes(), 4 + 5 + 28);
    }

    #[test]
    fn nothing_packed_has_no_first() {
        let p = Packed::with_capacity(2, 8);
        assert_eq!((p.len(), p.first(), p.iter().count()), (0, None, 0));
    }
}
