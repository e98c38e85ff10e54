//! The fence in an S3-compatible object store (cargo feature `s3`): [`S3Fence::put`]
//! writes an object only if the caller's fencing token is the newest the object has
//! seen, with one conditional PUT, so no table and no second store is involved.
//!
//! The object carries its token in its own user metadata ([`TOKEN_HEADER`], beside the
//! lock's name and the holder). A guarded write:
//! 1. `HEAD`s the object: its `ETag` and the token it was written with;
//! 2. refuses ([`Error::Fenced`]) if that token is newer than the caller's, or equal
//!    from another holder (a token handed out twice); an equal token of the same
//!    holder is that hold writing again and passes;
//! 3. `PUT`s the body with the caller's token in the metadata and `If-Match: <ETag>`
//!    (`If-None-Match: *` for a new object): the store writes it only if the object is
//!    still the one read in 1, atomically;
//! 4. on `412 Precondition Failed` (or S3's `409 ConditionalRequestConflict`) someone
//!    wrote in between: back to 1, whose token decides, at most
//!    [`attempts`](S3Fence::attempts) times.
//!
//! What it relies on: the store's conditional PUT (S3 since 2024, MinIO, moto, R2). One
//! limit: S3's `ETag` of a single-part upload is the MD5 of the bytes, so a newer
//! holder's write of the very bytes the object already holds changes its token but not
//! its `ETag`, and a stale writer that read before it still matches. Fencing protects
//! writes that change the bytes; docs/fencing.md ("Object stores") says more.
//!
//! Requests are signed with AWS Signature Version 4 in the `Authorization` header.

use std::fmt;
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use tokio::time::Instant;

mod sigv4;
mod wire;

use super::{token_of, HasToken, Token};
use crate::error::{Cause, Error, Result, StoreProblem};
use sigv4::Signer;
use wire::{check_bucket, error_code, header, metadata, parse_endpoint, stamp_of, xml_field};

/// The user metadata header with the token an object was written with.
pub const TOKEN_HEADER: &str = "x-amz-meta-redlatch-fence";
/// The user metadata header with the name of the lock whose token that is
/// (percent-encoded).
pub const LOCK_HEADER: &str = "x-amz-meta-redlatch-fence-lock";
/// The user metadata header with the holder that wrote (percent-encoded).
pub const HOLDER_HEADER: &str = "x-amz-meta-redlatch-fence-holder";
/// How long one call may take by default, all its requests together.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How many conditional writes one call tries by default before
/// [`StoreProblem::Conflict`].
pub const DEFAULT_ATTEMPTS: u32 = 5;
/// S3's limit on an object's user metadata, in bytes (names and values).
const MAX_METADATA: usize = 2048;

/// A fence for the objects of one bucket of an S3-compatible store.
///
/// Cheap to clone (one connection pool). The secret is kept only to sign requests:
/// neither `Debug` nor any error shows it.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// # // A private moto server (skipped, said plainly, where moto is not installed).
/// # let Some(moto) = redlatch_testkit::moto::MotoServer::start_or_skip("s3 doc") else { return Ok(()) };
/// # let (endpoint, key_id, secret) = (moto.endpoint(), moto.key_id(), moto.secret());
/// use redlatch::fence::s3::S3Fence;
/// use redlatch::{Client, Config, Error};
/// use std::time::Duration;
/// let store = S3Fence::new(&endpoint, "fence", "us-east-1", key_id, secret)? // your bucket
///     .timeout(Duration::from_secs(5)) // each call, its retries included
///     .attempts(3) // conditional writes tried when others write in between
///     .virtual_hosted(false); // path-style URLs (moto, MinIO); AWS: true
/// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
/// let lock = client.fenced_lock("daily-report");
/// let stale = lock.lock().await?; // a holder that will pause past its lease
/// lock.force_unlock().await?; // (as its lease running out would)
/// let guard = lock.lock().await?; // the next holder: a newer token
///
/// // Without the fence, the paused holder's write would land over the next one's:
/// store.put_unfenced("2026/12/01.csv", "day,total\n", &stale).await?;
/// let written = store.put("2026/12/02.csv", "day,total\n2026-12-02,42\n", &guard).await?;
/// assert_eq!(Some(written.token), guard.fencing_token());
/// // The paused holder wakes up and writes: refused, nothing of it lands.
/// match store.put("2026/12/02.csv", "day,total\n2026-12-02,0\n", &stale).await {
///     Err(Error::Fenced { presented, newest, .. }) => {
///         assert_eq!((Some(presented), Some(newest)), (stale.fencing_token(), guard.fencing_token()));
///     }
///     other => panic!("expected Error::Fenced, got {other:?}"),
/// }
/// let object = store.get("2026/12/02.csv").await?.expect("written");
/// assert_eq!(object.body, b"day,total\n2026-12-02,42\n");
/// assert_eq!(object.token.map(|t| t.value()), guard.fencing_token());
/// guard.unlock().await?;
/// # Ok(()) }) }
/// ```
#[derive(Clone)]
pub struct S3Fence {
    http: reqwest::Client,
    endpoint: Url,
    bucket: String,
    virtual_hosted: bool,
    signer: std::sync::Arc<Signer>,
    timeout: Duration,
    attempts: u32,
}

/// What a guarded write stored.
///
/// # Examples
/// See the example on [`S3Fence`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// The object's new `ETag`, as the store sent it (quoted).
    pub etag: String,
    /// The token recorded with it.
    pub token: u64,
}

/// An object as read by [`S3Fence::get`].
///
/// # Examples
/// See the example on [`S3Fence`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Object {
    /// Its bytes.
    pub body: Vec<u8>,
    /// Its `ETag` (quoted).
    pub etag: String,
    /// The token it was written with, `None` for an object written without a fence.
    pub token: Option<Token>,
}

/// The object's state as a `HEAD` saw it.
struct Stamp {
    etag: String,
    token: Option<Token>,
}

/// The condition a PUT is sent with.
enum Condition {
    Matches(String),
    Absent,
    None,
}

impl fmt::Debug for S3Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Fence")
            .field("endpoint", &self.endpoint.as_str())
            .field("bucket", &self.bucket)
            .field("region", &self.signer.region)
            .field("access_key_id", &self.signer.key_id)
            .field("timeout", &self.timeout)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl S3Fence {
    /// A fence for the objects of `bucket` at `endpoint` (`http://` or `https://`,
    /// host and port, no path: `https://s3.eu-west-1.amazonaws.com`,
    /// `http://127.0.0.1:9000`), signing for `region` with the access key pair.
    /// Path-style URLs (`endpoint/bucket/key`, what MinIO and moto expect) unless
    /// [`virtual_hosted`](Self::virtual_hosted). Nothing is sent yet.
    ///
    /// # Errors
    /// [`Error::Config`] for an endpoint that is not an `http(s)://host[:port]` URL, an
    /// empty region or access key id; [`Error::InvalidName`] for a bucket name S3
    /// refuses (3 to 63 lowercase letters, digits, `.` and `-`).
    ///
    /// # Examples
    /// See the example on [`S3Fence`].
    pub fn new(
        endpoint: &str,
        bucket: &str,
        region: &str,
        access_key_id: &str,
        secret_access_key: &str,
    ) -> Result<S3Fence> {
        let endpoint = parse_endpoint(endpoint)?;
        check_bucket(bucket)?;
        if region.is_empty() || access_key_id.is_empty() {
            return Err(config("an S3 fence needs a region and an access key id"));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(DEFAULT_TIMEOUT)
            .build()
            .map_err(|e| Error::Config {
                reason: format!("building the S3 fence's HTTP client: {e}"),
                source: Some(Cause::new(e)),
            })?;
        Ok(S3Fence {
            http,
            endpoint,
            bucket: bucket.to_string(),
            virtual_hosted: false,
            signer: std::sync::Arc::new(Signer {
                key_id: access_key_id.to_string(),
                secret: secret_access_key.to_string(),
                region: region.to_string(),
            }),
            timeout: DEFAULT_TIMEOUT,
            attempts: DEFAULT_ATTEMPTS,
        })
    }

    /// Bounds each call, all its requests and retries together (default
    /// [`DEFAULT_TIMEOUT`]); past it the call fails with [`StoreProblem::TimedOut`].
    ///
    /// # Examples
    /// See the example on [`S3Fence`].
    pub fn timeout(mut self, timeout: Duration) -> S3Fence {
        self.timeout = timeout;
        self
    }

    /// How many conditional writes one [`put`](Self::put) tries when others write the
    /// object in between (default [`DEFAULT_ATTEMPTS`]).
    ///
    /// # Examples
    /// See the example on [`S3Fence`].
    pub fn attempts(mut self, attempts: u32) -> S3Fence {
        self.attempts = attempts;
        self
    }

    /// Virtual-hosted URLs (`bucket.endpoint/key`, what AWS recommends) instead of
    /// path-style ones.
    ///
    /// # Examples
    /// See the example on [`S3Fence`].
    pub fn virtual_hosted(mut self, on: bool) -> S3Fence {
        self.virtual_hosted = on;
        self
    }

    /// Writes `body` as the object `key` only if `token`'s token is the newest the
    /// object has seen (equal passes for the holder that wrote it), recording the
    /// token in the object's metadata. Returns the new `ETag` and the token.
    ///
    /// `token` is anything with a token ([`HasToken`]): a fenced lock's guard, a
    /// leadership, a [`Token`]. An object written without a fence (no token) is taken
    /// over by the first fenced write.
    ///
    /// # Errors
    /// * [`Error::Fenced`] when the object holds a newer token (or the same token from
    ///   another holder): it names the key, the token presented and the newest seen.
    ///   Nothing was written.
    /// * [`Error::FenceMismatch`] when the object is fenced by another lock's tokens.
    /// * [`Error::Unsupported`] for a guard without a token, [`Error::InvalidName`] for
    ///   a key that is empty or over 1,024 bytes or a lock name and holder over S3's
    ///   2 KB of metadata, [`Error::InvalidCount`] for a token of 0 or over `i64::MAX`,
    ///   [`Error::Config`] for a zero timeout or attempts: nothing is sent.
    /// * [`Error::FenceStore`]: no such bucket ([`StoreProblem::NoBucket`]), refused
    ///   credentials ([`StoreProblem::Unauthorized`]), a store down or failing
    ///   ([`StoreProblem::Unavailable`]) or silent past the timeout
    ///   ([`StoreProblem::TimedOut`]), others writing each time for `attempts` rounds
    ///   ([`StoreProblem::Conflict`]), anything else ([`StoreProblem::Refused`]).
    ///
    /// # Cancel safety
    /// Dropping the future may leave the PUT sent: it lands only if no newer token
    /// was written meanwhile, as a completed call would.
    ///
    /// # Examples
    /// See the example on [`S3Fence`].
    pub async fn put(
        &self,
        key: &str,
        body: impl Into<Vec<u8>>,
        token: &(impl HasToken + ?Sized),
    ) -> Result<Written> {
        let token = checked(key, token)?;
        self.check_settings()?;
        let body = body.into();
        let deadline = Instant::now() + self.timeout;
        for _ in 0..self.attempts {
            let condition = match self.head(key, deadline).await? {
                Some(stamp) => {
                    if let Some(seen) = &stamp.token {
                        refuse_older(key, &token, seen)?;
                    }
                    Condition::Matches(stamp.etag)
                }
                None => Condition::Absent,
            };
            if let Some(etag) = self
                .send_put(key, &body, &token, condition, deadline)
                .await?
            {
                return Ok(Written {
                    etag,
                    token: token.value(),
                });
            }
        }
        Err(store_error(
            StoreProblem::Conflict,
            format!(
                "PUT {}/{key}: the object changed between the check and the write {} times in a row",
                self.bucket, self.attempts
            ),
            None,
        ))
    }

    /// Writes `body` as the object `key` with `token` recorded but **no check**: what
    /// a write without the fence does (a stale holder's lands over a newer one's).
    /// For seeding an object, and to show what [`put`](Self::put) prevents.
    ///
    /// # Errors
    /// As [`put`](Self::put), without [`Error::Fenced`], [`Error::FenceMismatch`] and
    /// [`StoreProblem::Conflict`].
    ///
    /// # Examples
    /// See the example on [`S3Fence`].
    pub async fn put_unfenced(
        &self,
        key: &str,
        body: impl Into<Vec<u8>>,
        token: &(impl HasToken + ?Sized),
    ) -> Result<Written> {
        let token = checked(key, token)?;
        self.check_settings()?;
        let deadline = Instant::now() + self.timeout;
        let etag = self
            .send_put(key, &body.into(), &token, Condition::None, deadline)
            .await?;
        Ok(Written {
            etag: etag.unwrap_or_default(),
            token: token.value(),
        })
    }

    /// Reads the object `key`: its bytes, `ETag` and the token it was written with;
    /// `None` when there is no such object.
    ///
    /// # Errors
    /// [`Error::FenceStore`] as for [`put`](Self::put) (no such bucket, refused
    /// credentials, a store down or silent); [`Error::InvalidName`] for an empty key.
    ///
    /// # Examples
    /// See the example on [`S3Fence`].
    pub async fn get(&self, key: &str) -> Result<Option<Object>> {
        check_key(key)?;
        self.check_settings()?;
        let deadline = Instant::now() + self.timeout;
        let reply = self
            .send(Method::GET, key, Vec::new(), Vec::new(), deadline)
            .await?;
        let (status, headers) = (reply.status(), reply.headers().clone());
        let body = self.read_body(reply, deadline, "GET", key).await?;
        if status == StatusCode::NOT_FOUND && error_code(&body) == Some("NoSuchKey") {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(self.refused(status, &body, "GET", key));
        }
        let stamp = stamp_of(&headers, &self.bucket, key)?;
        Ok(Some(Object {
            body,
            etag: stamp.etag,
            token: stamp.token,
        }))
    }

    fn check_settings(&self) -> Result<()> {
        if self.timeout.is_zero() || self.attempts == 0 {
            return Err(config(format!(
                "an S3 fence needs a timeout above zero and at least one attempt (timeout {:?}, attempts {})",
                self.timeout, self.attempts
            )));
        }
        Ok(())
    }

    /// The object's `ETag` and token, `None` when there is no such object (or no such
    /// bucket: a `HEAD` cannot tell; the PUT that follows does).
    async fn head(&self, key: &str, deadline: Instant) -> Result<Option<Stamp>> {
        let reply = self
            .send(Method::HEAD, key, Vec::new(), Vec::new(), deadline)
            .await?;
        match reply.status() {
            s if s.is_success() => stamp_of(reply.headers(), &self.bucket, key).map(Some),
            StatusCode::NOT_FOUND => Ok(None),
            s => Err(self.refused(s, b"", "HEAD", key)),
        }
    }

    /// One PUT of `body` with `token`'s metadata under `condition`: the new `ETag`, or
    /// `None` when the condition failed (412, or S3's 409 for a concurrent one).
    async fn send_put(
        &self,
        key: &str,
        body: &[u8],
        token: &Token,
        condition: Condition,
        deadline: Instant,
    ) -> Result<Option<String>> {
        let mut headers = metadata(token);
        match condition {
            Condition::Matches(etag) => headers.push(("if-match".into(), etag)),
            Condition::Absent => headers.push(("if-none-match".into(), "*".into())),
            Condition::None => {}
        }
        let reply = self
            .send(Method::PUT, key, headers, body.to_vec(), deadline)
            .await?;
        let status = reply.status();
        let etag = header(reply.headers(), "etag").unwrap_or_default();
        let answer = self.read_body(reply, deadline, "PUT", key).await?;
        match status {
            s if s.is_success() => Ok(Some(etag)),
            StatusCode::PRECONDITION_FAILED | StatusCode::CONFLICT => Ok(None),
            s => Err(self.refused(s, &answer, "PUT", key)),
        }
    }

    /// The URL of `key` and the `Host` header a signature covers.
    fn url(&self, key: &str) -> Result<(Url, String, String)> {
        let host = self.endpoint.host_str().unwrap_or_default();
        let host = if self.virtual_hosted {
            format!("{}.{host}", self.bucket)
        } else {
            host.to_string()
        };
        let host = match self.endpoint.port() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        };
        let path = match self.virtual_hosted {
            true => format!("/{}", sigv4::uri_encode(key, true)),
            false => format!("/{}/{}", self.bucket, sigv4::uri_encode(key, true)),
        };
        let url = Url::parse(&format!("{}://{host}{path}", self.endpoint.scheme()))
            .map_err(|e| config(format!("object key {key:?} makes no URL: {e}")))?;
        Ok((url, host, path))
    }

    /// Sends one signed request, within `deadline`.
    async fn send(
        &self,
        method: Method,
        key: &str,
        mut headers: Vec<(String, String)>,
        body: Vec<u8>,
        deadline: Instant,
    ) -> Result<reqwest::Response> {
        let (url, host, path) = self.url(key)?;
        let (_, amz_date) = sigv4::amz_dates(sigv4::now_secs());
        let payload = sigv4::sha256_hex(&body);
        headers.push(("x-amz-date".into(), amz_date.clone()));
        headers.push(("x-amz-content-sha256".into(), payload.clone()));
        let mut signed = headers.clone();
        signed.push(("host".into(), host));
        let request = sigv4::Request {
            method: method.as_str(),
            path: &path,
            headers: signed,
            payload_sha256: payload,
        };
        let authorization = self.signer.authorization(&request, &amz_date);
        let mut builder = self.http.request(method.clone(), url);
        for (name, value) in headers {
            builder = builder.header(name, value);
        }
        let builder = builder.header("authorization", authorization).body(body);
        let what = format!("{method} {}/{key}", self.bucket);
        match tokio::time::timeout_at(deadline, builder.send()).await {
            Err(_) => Err(self.timed_out(&what)),
            Ok(Err(e)) => Err(transport_error(e, &what)),
            Ok(Ok(reply)) => Ok(reply),
        }
    }

    async fn read_body(
        &self,
        reply: reqwest::Response,
        deadline: Instant,
        method: &str,
        key: &str,
    ) -> Result<Vec<u8>> {
        let what = format!("{method} {}/{key}", self.bucket);
        match tokio::time::timeout_at(deadline, reply.bytes()).await {
            Err(_) => Err(self.timed_out(&what)),
            Ok(Err(e)) => Err(transport_error(e, &what)),
            Ok(Ok(bytes)) => Ok(bytes.to_vec()),
        }
    }

    fn timed_out(&self, what: &str) -> Error {
        store_error(
            StoreProblem::TimedOut,
            format!("{what}: no answer within {:?}", self.timeout),
            None,
        )
    }

    /// The typed error of a refusal: the store's error code decides.
    fn refused(&self, status: StatusCode, body: &[u8], method: &str, key: &str) -> Error {
        let code = error_code(body);
        let problem = match (code, status) {
            (Some("NoSuchBucket"), _) => StoreProblem::NoBucket,
            (
                Some(
                    "InvalidAccessKeyId"
                    | "SignatureDoesNotMatch"
                    | "AccessDenied"
                    | "InvalidClientTokenId",
                ),
                _,
            )
            | (None, StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED) => {
                StoreProblem::Unauthorized
            }
            (Some("SlowDown" | "ServiceUnavailable" | "InternalError"), _) => {
                StoreProblem::Unavailable
            }
            (_, s) if s.is_server_error() => StoreProblem::Unavailable,
            _ => StoreProblem::Refused,
        };
        let words = match code {
            Some(code) => format!("{code}: {}", xml_field(body, "Message").unwrap_or_default()),
            None => "(no error document)".to_string(),
        };
        let words: String = words.chars().take(300).collect();
        store_error(
            problem,
            format!(
                "{method} {}/{key}: HTTP {}: {words}",
                self.bucket,
                status.as_u16()
            ),
            None,
        )
    }
}

/// The caller's token, checked with the key and the metadata it will make.
fn checked(key: &str, source: &(impl HasToken + ?Sized)) -> Result<Token> {
    let token = token_of(source, key)?;
    token.checked(key)?;
    let size: usize = metadata(&token)
        .iter()
        .map(|(k, v)| k.len() - "x-amz-meta-".len() + v.len())
        .sum();
    if size > MAX_METADATA {
        return Err(Error::InvalidName(format!(
            "lock {:?} and holder {:?} make {size} bytes of object metadata: S3 takes {MAX_METADATA}",
            token.lock(),
            token.holder()
        )));
    }
    Ok(token)
}

fn check_key(key: &str) -> Result<()> {
    Token::new("-", 1).checked(key).map(|_| ())
}

/// Refuses `token` where the object holds `seen`: another lock's, a newer one, or the
/// same from another holder.
fn refuse_older(key: &str, token: &Token, seen: &Token) -> Result<()> {
    if seen.lock() != token.lock() {
        return Err(Error::FenceMismatch {
            resource: key.to_string(),
            lock: token.lock().to_string(),
            fenced_by: seen.lock().to_string(),
        });
    }
    let same_hold = seen.value() == token.value() && seen.holder() == token.holder();
    if seen.value() > token.value() || (seen.value() == token.value() && !same_hold) {
        return Err(Error::Fenced {
            resource: key.to_string(),
            lock: token.lock().to_string(),
            presented: token.value(),
            newest: seen.value(),
        });
    }
    Ok(())
}

fn config(reason: impl Into<String>) -> Error {
    Error::Config {
        reason: reason.into(),
        source: None,
    }
}

fn store_error(problem: StoreProblem, detail: String, source: Option<Cause>) -> Error {
    Error::FenceStore {
        store: "s3",
        problem,
        detail,
        source,
    }
}

/// An error of the HTTP exchange itself: the store is down or the connection broke.
fn transport_error(e: reqwest::Error, what: &str) -> Error {
    let problem = if e.is_timeout() {
        StoreProblem::TimedOut
    } else {
        StoreProblem::Unavailable
    };
    // reqwest's messages never show the headers (the signature); the URL is in `what`.
    let e = e.without_url();
    let mut detail = format!("{what}: {e}");
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        detail.push_str(&format!(": {s}"));
        source = s.source();
    }
    store_error(problem, detail, Some(Cause::new(e)))
}
