//! What the two loopback HTTP doors, `flycode mcp --http` and `flycode watch --browser`, read
//! from a request's headers the same way before they let it in: the host name it names (the
//! DNS-rebinding check), the bearer token it presents (compared in constant time) and the
//! length its body declares.

use http::HeaderMap;

/// The host name of the `Host` header, lower case, without its port or an IPv6 address's
/// brackets; `None` when there is none or it is not an authority.
pub(crate) fn host_name(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(http::header::HOST)?.to_str().ok()?;
    let authority = host.parse::<http::uri::Authority>().ok()?;
    Some(
        authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
    )
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme in any case).
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The body's length as `Content-Length` declares it, where it does.
pub(crate) fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether `given` is `secret`, in time that does not depend on where they differ.
pub(crate) fn is_secret(given: &str, secret: &str) -> bool {
    crate::sandbox::seal::equal_in_constant_time(given.as_bytes(), secret.as_bytes())
}
