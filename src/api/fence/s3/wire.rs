//! The S3 fence's wire details: the metadata that records a token, what a reply's
//! headers and error document say, and the checks of an endpoint and a bucket name.

use reqwest::header::HeaderMap;
use reqwest::Url;

use super::sigv4;
use super::{config, store_error, Stamp, HOLDER_HEADER, LOCK_HEADER, TOKEN_HEADER};
use crate::api::fence::Token;
use crate::error::{Error, Result, StoreProblem};

/// The metadata headers recording `token`.
pub(super) fn metadata(token: &Token) -> Vec<(String, String)> {
    vec![
        (TOKEN_HEADER.into(), token.value().to_string()),
        (LOCK_HEADER.into(), sigv4::uri_encode(token.lock(), false)),
        (
            HOLDER_HEADER.into(),
            sigv4::uri_encode(token.holder(), false),
        ),
    ]
}

/// The `ETag` and token of an object's headers.
pub(super) fn stamp_of(headers: &HeaderMap, bucket: &str, key: &str) -> Result<Stamp> {
    let etag = header(headers, "etag").unwrap_or_default();
    let Some(value) = header(headers, TOKEN_HEADER) else {
        return Ok(Stamp { etag, token: None });
    };
    let Ok(value) = value.parse::<u64>() else {
        return Err(store_error(
            StoreProblem::Refused,
            format!("{bucket}/{key}: its {TOKEN_HEADER} is not a token: {value:?}"),
            None,
        ));
    };
    let lock = percent_decode(&header(headers, LOCK_HEADER).unwrap_or_default());
    let holder = percent_decode(&header(headers, HOLDER_HEADER).unwrap_or_default());
    Ok(Stamp {
        etag,
        token: Some(Token::new(lock, value).with_holder(holder)),
    })
}

pub(super) fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    Some(headers.get(name)?.to_str().ok()?.to_string())
}

pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The text of `<field>` in an S3 error document.
pub(super) fn xml_field<'a>(body: &'a [u8], field: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(body).ok()?;
    let start = text.find(&format!("<{field}>"))? + field.len() + 2;
    let end = text[start..].find(&format!("</{field}>"))? + start;
    Some(&text[start..end])
}

pub(super) fn error_code(body: &[u8]) -> Option<&str> {
    xml_field(body, "Code")
}

pub(super) fn parse_endpoint(endpoint: &str) -> Result<Url> {
    let url = Url::parse(endpoint)
        .map_err(|e| config(format!("S3 endpoint {endpoint:?} is not a URL: {e}")))?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some_and(|h| !h.is_empty())
        && matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    if !plain {
        return Err(config(format!(
            "S3 endpoint {endpoint:?}: expected http(s)://host[:port], no path, query or credentials"
        )));
    }
    Ok(url)
}

pub(super) fn check_bucket(bucket: &str) -> Result<()> {
    let ok = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidName(format!(
            "bucket name {bucket:?}: S3 takes 3 to 63 lowercase letters, digits, '.' and '-'"
        )))
    }
}
