//! AWS Signature Version 4 in the `Authorization` header, for the S3 fence's requests:
//! the canonical request (method, path, no query, the signed headers, the payload's
//! SHA-256), the string to sign over the date and scope, the key derived from the
//! secret by four HMACs. What S3, MinIO and moto (with authentication on) check.
//!
//! Invariants:
//! 1. Every header sent that starts with `x-amz-` is signed, and `host`; `content-length`
//!    and reqwest's own are not (S3 does not require them).
//! 2. The secret is only ever an HMAC key here: never formatted, never in an error.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = hmac::Hmac<Sha256>;

/// The access key pair, the region and the service a request is signed for.
pub(crate) struct Signer {
    pub(crate) key_id: String,
    pub(crate) secret: String,
    pub(crate) region: String,
}

/// One request to sign: its method, URI-encoded path, and headers (lowercase names).
pub(crate) struct Request<'a> {
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) payload_sha256: String,
}

/// The hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// `(YYYYMMDD, YYYYMMDDTHHMMSSZ)` of `secs` since the epoch, UTC.
pub(crate) fn amz_dates(secs: u64) -> (String, String) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to a civil date (Howard Hinnant's algorithm, the proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let date = format!("{year:04}{month:02}{day:02}");
    let (h, m, s) = (rem / 3_600, rem / 60 % 60, rem % 60);
    let stamp = format!("{date}T{h:02}{m:02}{s:02}Z");
    (date, stamp)
}

/// The seconds since the epoch now.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Percent-encodes `s` as SigV4 and S3 want in a path (every byte but the unreserved
/// `A-Za-z0-9-_.~`; `/` kept when `keep_slash`).
pub(crate) fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

impl Signer {
    /// The `Authorization` header's value for `req`, sent at `amz_date`
    /// (`YYYYMMDDTHHMMSSZ`, also sent as `x-amz-date`, which `req` must carry).
    pub(crate) fn authorization(&self, req: &Request<'_>, amz_date: &str) -> String {
        let mut headers: Vec<(String, String)> = req
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        headers.sort();
        let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
        let signed: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
        let signed = signed.join(";");
        let canonical = format!(
            "{}\n{}\n\n{canonical_headers}\n{signed}\n{}",
            req.method, req.path, req.payload_sha256
        );
        let date = &amz_date[..8];
        let scope = format!("{date}/{}/s3/aws4_request", self.region);
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            sha256_hex(canonical.as_bytes())
        );
        let mut key = hmac(format!("AWS4{}", self.secret).as_bytes(), date);
        for part in [self.region.as_str(), "s3", "aws4_request"] {
            key = hmac(&key, part);
        }
        let signature = hex(&hmac(&key, &to_sign));
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
            self.key_id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's worked example of header signing ("Signature Calculations for the
    /// Authorization Header", GET Object): its published signature.
    #[test]
    fn signs_the_documented_get_object_example() {
        let signer = Signer {
            key_id: "AKIAIOSFODNN7EXAMPLE".into(),
            secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            region: "us-east-1".into(),
        };
        let empty = sha256_hex(b"");
        let req = Request {
            method: "GET",
            path: "/test.txt",
            headers: vec![
                ("Host".into(), "examplebucket.s3.amazonaws.com".into()),
                ("Range".into(), "bytes=0-9".into()),
                ("x-amz-content-sha256".into(), empty.clone()),
                ("x-amz-date".into(), "20130524T000000Z".into()),
            ],
            payload_sha256: empty,
        };
        assert_eq!(
            signer.authorization(&req, "20130524T000000Z"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn dates_are_utc_civil_dates() {
        assert_eq!(amz_dates(0), ("19700101".into(), "19700101T000000Z".into()));
        // 2013-05-24T00:00:00Z, the example's; 2024-02-29T23:59:59Z, a leap day.
        assert_eq!(amz_dates(1_369_353_600).1, "20130524T000000Z");
        assert_eq!(amz_dates(1_709_251_199).1, "20240229T235959Z");
    }

    #[test]
    fn paths_are_encoded_byte_by_byte() {
        assert_eq!(uri_encode("a b/ü~", true), "a%20b/%C3%BC~");
        assert_eq!(uri_encode("a/b", false), "a%2Fb");
    }
}
