//! Who may talk to `flycode watch --browser` (PROTOCOL.md §12, "The browser companion's
//! loopback API"): every request is checked here before its body is read.
//!
//! In this order, each failure answered with a status and a few words:
//!
//! 1. **Host**: the `Host` header names loopback (`127.0.0.1`, `localhost`, `[::1]`). A web page
//!    that rebinds its own domain name to 127.0.0.1 sends its own name: 403.
//! 2. **Origin**: a request with an `Origin` header is refused (403) unless the origin is a
//!    browser extension's (`chrome-extension://`, `moz-extension://`,
//!    `safari-web-extension://`); a web page's script always sends its page's origin. No CORS
//!    header is ever sent, so no page may read an answer either.
//! 3. **Content type**: a `POST` must say `Content-Type: application/json`, which a page cannot
//!    send without a CORS preflight (answered 403 like any `OPTIONS`).
//! 4. **Token**: every route but the pairing page and `POST /v1/pair` needs
//!    `Authorization: Bearer TOKEN`, the token pairing gave; compared in constant time (401).
//! 5. **Size**: a body declared larger than the limit is refused (413) before it is read.

use http::{HeaderMap, Method, StatusCode};

/// The schemes of browser extensions' own pages.
const EXTENSION_SCHEMES: [&str; 3] = [
    "chrome-extension://",
    "moz-extension://",
    "safari-web-extension://",
];

/// A refused request: its status and its words.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BrowserRefusal {
    pub status: StatusCode,
    pub words: &'static str,
}

impl BrowserRefusal {
    const fn new(status: StatusCode, words: &'static str) -> BrowserRefusal {
        BrowserRefusal { status, words }
    }
}

pub(crate) const FOREIGN_HOST: BrowserRefusal = BrowserRefusal::new(
    StatusCode::FORBIDDEN,
    "Forbidden: this server answers only to 127.0.0.1, localhost and [::1]\n",
);
pub(crate) const FOREIGN_ORIGIN: BrowserRefusal = BrowserRefusal::new(
    StatusCode::FORBIDDEN,
    "Forbidden: requests from web pages are refused; only the flycode extension may call\n",
);
pub(crate) const NOT_JSON: BrowserRefusal = BrowserRefusal::new(
    StatusCode::UNSUPPORTED_MEDIA_TYPE,
    "Unsupported Media Type: send Content-Type: application/json\n",
);
pub(crate) const UNPAIRED: BrowserRefusal = BrowserRefusal::new(
    StatusCode::UNAUTHORIZED,
    "Unauthorized: pair the flycode extension first (open the link flycode watch --browser printed)\n",
);
pub(crate) const NOT_FOUND: BrowserRefusal =
    BrowserRefusal::new(StatusCode::NOT_FOUND, "Not Found\n");
pub(crate) const NO_PREFLIGHT: BrowserRefusal = BrowserRefusal::new(
    StatusCode::FORBIDDEN,
    "Forbidden: no cross-origin requests\n",
);
pub(crate) const TOO_LARGE: BrowserRefusal =
    BrowserRefusal::new(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large\n");

/// Whether a request may be read: the checks 1, 2, 3 and 5 above (the token is the route's).
pub(crate) fn check_request(
    method: &Method,
    headers: &HeaderMap,
    max_body: u64,
) -> Result<(), BrowserRefusal> {
    if !host_is_loopback(headers) {
        return Err(FOREIGN_HOST);
    }
    if let Some(origin) = headers.get(http::header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("").to_ascii_lowercase();
        if !EXTENSION_SCHEMES
            .iter()
            .any(|scheme| origin.len() > scheme.len() && origin.starts_with(scheme))
        {
            return Err(FOREIGN_ORIGIN);
        }
    }
    if method == Method::OPTIONS {
        return Err(NO_PREFLIGHT);
    }
    if method == Method::POST {
        let json = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .is_some_and(|kind| kind.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Err(NOT_JSON);
        }
    }
    let declared = crate::http_checks::declared_length(headers);
    if declared.is_some_and(|length| length > max_body) {
        return Err(TOO_LARGE);
    }
    Ok(())
}

/// Whether the `Authorization: Bearer` token of `headers` is `token`, compared in constant time.
pub(crate) fn has_token(headers: &HeaderMap, token: &str) -> bool {
    crate::http_checks::bearer_token(headers)
        .is_some_and(|given| crate::http_checks::is_secret(given, token))
}

/// Whether the `Host` header names loopback (any port: the listening socket chose it).
fn host_is_loopback(headers: &HeaderMap) -> bool {
    crate::http_checks::host_name(headers)
        .is_some_and(|name| matches!(name.as_str(), "127.0.0.1" | "localhost" | "::1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn loopback_hosts_pass_and_a_rebinding_name_does_not() {
        for host in [
            "127.0.0.1:4681",
            "localhost:4681",
            "[::1]:4681",
            "LOCALHOST",
        ] {
            assert_eq!(
                check_request(&Method::GET, &headers(&[("host", host)]), 10),
                Ok(()),
                "{host}"
            );
        }
        for host in ["evil.example:4681", "127.0.0.1.evil.example", ""] {
            assert_eq!(
                check_request(&Method::GET, &headers(&[("host", host)]), 10),
                Err(FOREIGN_HOST),
                "{host}"
            );
        }
        assert_eq!(
            check_request(&Method::GET, &HeaderMap::new(), 10),
            Err(FOREIGN_HOST)
        );
    }

    #[test]
    fn only_an_extensions_origin_or_none_passes() {
        let host = ("host", "127.0.0.1:4681");
        for origin in [
            "chrome-extension://abcdefghijklmnop",
            "moz-extension://0f1e2d3c-aaaa-bbbb",
        ] {
            assert_eq!(
                check_request(&Method::GET, &headers(&[host, ("origin", origin)]), 10),
                Ok(())
            );
        }
        for origin in [
            "https://chatgpt.com",
            "http://127.0.0.1:4681",
            "null",
            "chrome-extension://",
        ] {
            assert_eq!(
                check_request(&Method::GET, &headers(&[host, ("origin", origin)]), 10),
                Err(FOREIGN_ORIGIN),
                "{origin}"
            );
        }
    }

    #[test]
    fn a_post_must_be_json_a_preflight_is_refused_and_a_large_body_is_413() {
        let host = ("host", "127.0.0.1:4681");
        let json = ("content-type", "application/json; charset=utf-8");
        assert_eq!(
            check_request(&Method::POST, &headers(&[host, json]), 10),
            Ok(())
        );
        assert_eq!(
            check_request(
                &Method::POST,
                &headers(&[host, ("content-type", "text/plain")]),
                10
            ),
            Err(NOT_JSON)
        );
        assert_eq!(
            check_request(&Method::OPTIONS, &headers(&[host]), 10),
            Err(NO_PREFLIGHT)
        );
        assert_eq!(
            check_request(
                &Method::POST,
                &headers(&[host, json, ("content-length", "11")]),
                10
            ),
            Err(TOO_LARGE)
        );
    }

    #[test]
    fn the_token_is_compared_whole() {
        let token = "00112233445566778899aabbccddeeff";
        assert!(has_token(
            &headers(&[("authorization", &format!("Bearer {token}"))]),
            token
        ));
        assert!(!has_token(
            &headers(&[("authorization", "Bearer 0011")]),
            token
        ));
        assert!(!has_token(
            &headers(&[("authorization", &format!("Basic {token}"))]),
            token
        ));
        assert!(!has_token(&HeaderMap::new(), token));
    }
}
