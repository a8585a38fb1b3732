//! Who may talk to `flycode mcp --http` (PROTOCOL.md §14, "Over HTTP"): every request is
//! checked here before rmcp reads a byte of its body.
//!
//! In this order, each failure answered with a status and a few words, nothing else:
//!
//! 1. **Host**: the `Host` header names this machine's loopback (`127.0.0.1`, `localhost`,
//!    `[::1]`), the address flycode listens on, or a name the person allowed (`--allow-host`, a
//!    tunnel's public name). A web page that rebinds its own domain name to 127.0.0.1 sends its
//!    own name: 403.
//! 2. **Origin**: a request with an `Origin` header comes from a web page's script; refused
//!    (403) unless the person allowed that origin (`--allow-origin`). MCP clients, the chat
//!    sites' servers among them, send none.
//! 3. **Secret**: `Authorization: Bearer SECRET`, or the secret as the path's last segment
//!    (`/mcp/SECRET`, for clients that take only a URL). Missing or wrong: 401, compared in
//!    constant time.
//! 4. **Path**: `/mcp` (with the header) or `/mcp/SECRET`; anything else is 404.
//! 5. **Size**: a body declared larger than [`MAX_BODY`] is refused (413) before it is read;
//!    rmcp counts an undeclared one as it reads and stops at the same bound.
//!
//! The secret is 32 random bytes in the state folder (`mcp-http.key`, mode 0600), made on
//! first use, shown and replaced by `flycode mcp --show-secret` / `--rotate-secret`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;

use http::{HeaderMap, StatusCode, Uri};

use crate::sandbox::seal::{KeyError, private_key_file, replace_private_key_file};

/// The secret's file, in the state folder.
pub(crate) const SECRET_FILE: &str = "mcp-http.key";

/// The path clients post to.
pub(crate) const ENDPOINT: &str = "/mcp";

/// The largest request body read: a 1 MB file written through `fs_write` is about that much
/// JSON, and stdio's framing takes lines up to the same size.
pub(crate) const MAX_BODY: usize = crate::mcp::transport::MAX_LINE;

/// The secret clients present, as hex.
#[derive(Clone)]
pub(crate) struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The secret kept in the state folder, made if there is none.
    pub(crate) fn load_or_make() -> Result<Secret, SecretError> {
        let dir = state_dir()?;
        Ok(Secret(hex::encode(private_key_file(&dir, SECRET_FILE)?)))
    }

    /// The secret in the state folder, followed as it changes: a rotation takes effect in a
    /// running server at its next request.
    pub(crate) fn followed() -> Result<FollowedSecret, SecretError> {
        // The file's stamp before its content: a rotation between the two is then seen as a
        // change at the first request, not hidden under the new file's stamp.
        let file = state_dir()?.join(SECRET_FILE);
        let stamp = stamp_of(&file);
        let secret = Secret::load_or_make()?;
        Ok(FollowedSecret {
            file: Some(file),
            current: Mutex::new((secret, stamp)),
        })
    }

    /// A new secret in place of the old one: clients that had the old one are refused from
    /// now on.
    pub(crate) fn rotate() -> Result<Secret, SecretError> {
        let dir = state_dir()?;
        Ok(Secret(hex::encode(replace_private_key_file(
            &dir,
            SECRET_FILE,
        )?)))
    }

    /// The secret as a client presents it.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `given` is the secret, compared in constant time.
    fn is(&self, given: &str) -> bool {
        crate::http_checks::is_secret(given, &self.0)
    }
}

/// The secret a server checks requests against: the file's, read again whenever the file
/// changed (one `stat` a request), so `flycode mcp --rotate-secret` locks the old secret out at
/// once.
pub(crate) struct FollowedSecret {
    /// The file, or none (a fixed secret: tests).
    file: Option<PathBuf>,
    current: Mutex<(Secret, Option<SecretFileStamp>)>,
}

/// What tells that the secret's file changed: its identity, size and time of change.
type SecretFileStamp = (u64, u64, i64, i64);

fn stamp_of(file: &std::path::Path) -> Option<SecretFileStamp> {
    use std::os::unix::fs::MetadataExt;
    crate::sandbox::host::symlink_metadata(file)
        .ok()
        .map(|meta| (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec()))
}

impl FollowedSecret {
    /// A secret that never changes.
    #[cfg(test)]
    fn fixed(secret: Secret) -> FollowedSecret {
        FollowedSecret {
            file: None,
            current: Mutex::new((secret, None)),
        }
    }

    /// The secret as it was read last.
    pub(crate) fn current(&self) -> Secret {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
            .clone()
    }

    /// Whether `given` is the secret as the file says now. A file that cannot be read keeps
    /// the secret read last (a removed file is not a rotation).
    fn is(&self, given: &str) -> bool {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(file) = &self.file {
            let stamp = stamp_of(file);
            if stamp.is_some()
                && stamp != current.1
                && let Ok(secret) = Secret::load_or_make()
            {
                *current = (secret, stamp);
            }
        }
        current.0.is(given)
    }
}

/// The secret could not be kept.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretError {
    /// No state folder.
    #[error(
        "no state folder to keep flycode mcp --http's secret in: set FLYCODE_STATE_DIR, XDG_STATE_HOME or HOME"
    )]
    NoStateDir,
    /// The file could not be read or made.
    #[error("flycode mcp --http's secret: {0}")]
    File(#[from] KeyError),
}

fn state_dir() -> Result<PathBuf, SecretError> {
    crate::sandbox::state::state_dir().ok_or(SecretError::NoStateDir)
}

/// The address a request came from, put among the request's extensions for the audit log.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientAddress(pub SocketAddr);

/// What the checks allow besides loopback and the secret.
pub(crate) struct Access {
    secret: FollowedSecret,
    /// Host names (lower case, without port) a request may name: loopback's, the listening
    /// address's, and the person's `--allow-host` names.
    hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`, lower case) a page may send requests from.
    origins: Vec<String>,
}

/// A refused request: its status and its words.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub words: &'static str,
}

impl Refusal {
    const fn new(status: StatusCode, words: &'static str) -> Refusal {
        Refusal { status, words }
    }
}

const FOREIGN_HOST: Refusal = Refusal::new(
    StatusCode::FORBIDDEN,
    "Forbidden: this server answers only to the Host names it was started for\n",
);
const FOREIGN_ORIGIN: Refusal = Refusal::new(
    StatusCode::FORBIDDEN,
    "Forbidden: requests from web pages are refused\n",
);
const NO_SECRET: Refusal = Refusal::new(StatusCode::UNAUTHORIZED, "Unauthorized\n");
const NOT_FOUND: Refusal = Refusal::new(StatusCode::NOT_FOUND, "Not Found\n");
const TOO_LARGE: Refusal = Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large\n");

impl Access {
    /// Checks for a server listening on `listening`, with `secret`, also answering to
    /// `allow_hosts` and to pages of `allow_origins`.
    pub(crate) fn new(
        secret: FollowedSecret,
        listening: SocketAddr,
        allow_hosts: &[String],
        allow_origins: &[String],
    ) -> Access {
        let mut hosts: Vec<String> = ["127.0.0.1", "localhost", "::1"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        hosts.push(listening.ip().to_string());
        hosts.extend(allow_hosts.iter().map(|host| host.to_ascii_lowercase()));
        Access {
            secret,
            hosts,
            origins: allow_origins
                .iter()
                .map(|origin| origin.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }
    }

    /// The host names a request may name, for rmcp's own check (the same list).
    pub(crate) fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Whether a request with this URI and these headers may go on to rmcp; `Ok` gives the URI
    /// it goes on with (the secret taken out of the path).
    pub(crate) fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<Uri, Refusal> {
        if !self.host_is_allowed(headers) {
            return Err(FOREIGN_HOST);
        }
        if let Some(origin) = headers.get(http::header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("").trim_end_matches('/');
            if !self
                .origins
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(origin))
            {
                return Err(FOREIGN_ORIGIN);
            }
        }
        let path = uri.path();
        let by_header =
            crate::http_checks::bearer_token(headers).is_some_and(|token| self.secret.is(token));
        let in_path = path
            .strip_prefix(ENDPOINT)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|token| self.secret.is(token.trim_end_matches('/')));
        if !by_header && !in_path {
            return Err(NO_SECRET);
        }
        if !in_path && path != ENDPOINT && path != "/mcp/" {
            return Err(NOT_FOUND);
        }
        let declared = crate::http_checks::declared_length(headers);
        if declared.is_some_and(|length| length > MAX_BODY as u64) {
            return Err(TOO_LARGE);
        }
        let mut parts = uri.clone().into_parts();
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static(ENDPOINT));
        Ok(Uri::from_parts(parts).unwrap_or_else(|_| Uri::from_static(ENDPOINT)))
    }

    /// Whether the `Host` header names one of [`Access::hosts`] (any port: the listening
    /// socket already chose it).
    fn host_is_allowed(&self, headers: &HeaderMap) -> bool {
        crate::http_checks::host_name(headers).is_some_and(|name| self.hosts.contains(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn access() -> Access {
        Access::new(
            FollowedSecret::fixed(Secret(SECRET.to_owned())),
            "127.0.0.1:4680".parse().unwrap(),
            &["my-tunnel.example.com".to_owned()],
            &["http://localhost:6274".to_owned()],
        )
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    fn check(path: &str, pairs: &[(&str, &str)]) -> Result<Uri, Refusal> {
        access().check(&path.parse().unwrap(), &headers(pairs))
    }

    const BEARER: &str = "Bearer 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_secret_in_the_header_or_the_path_lets_a_request_through_to_the_endpoint() {
        let by_header = check(
            "/mcp",
            &[("host", "127.0.0.1:4680"), ("authorization", BEARER)],
        );
        assert_eq!(by_header.unwrap().path(), "/mcp");
        let in_path = check(&format!("/mcp/{SECRET}"), &[("host", "localhost:4680")]);
        assert_eq!(
            in_path.unwrap().path(),
            "/mcp",
            "the secret never reaches rmcp"
        );
        let tunnel = check(
            "/mcp",
            &[("host", "My-Tunnel.example.com"), ("authorization", BEARER)],
        );
        assert!(tunnel.is_ok());
    }

    #[test]
    fn no_secret_or_a_wrong_one_is_401_whatever_the_path() {
        for (path, auth) in [
            ("/mcp", None),
            ("/mcp", Some("Bearer nope")),
            ("/mcp", Some(&BEARER[..BEARER.len() - 1])),
            ("/mcp/0123", None),
            ("/elsewhere", None),
            ("/", Some("Basic abc")),
        ] {
            let mut pairs = vec![("host", "127.0.0.1:4680")];
            if let Some(auth) = auth {
                pairs.push(("authorization", auth));
            }
            assert_eq!(
                check(path, &pairs).unwrap_err(),
                NO_SECRET,
                "{path} {auth:?}"
            );
        }
    }

    #[test]
    fn a_foreign_host_or_a_web_pages_origin_is_refused_before_the_secret_is_looked_at() {
        let rebound = check(
            "/mcp",
            &[("host", "evil.example:4680"), ("authorization", BEARER)],
        );
        assert_eq!(rebound.unwrap_err(), FOREIGN_HOST);
        assert_eq!(
            check("/mcp", &[("authorization", BEARER)]).unwrap_err(),
            FOREIGN_HOST
        );
        let page = check(
            "/mcp",
            &[
                ("host", "127.0.0.1:4680"),
                ("authorization", BEARER),
                ("origin", "https://evil.example"),
            ],
        );
        assert_eq!(page.unwrap_err(), FOREIGN_ORIGIN);
        let allowed = check(
            "/mcp",
            &[
                ("host", "127.0.0.1:4680"),
                ("authorization", BEARER),
                ("origin", "http://localhost:6274"),
            ],
        );
        assert!(allowed.is_ok());
        let ipv6 = check("/mcp", &[("host", "[::1]:4680"), ("authorization", BEARER)]);
        assert!(ipv6.is_ok());
    }

    #[test]
    fn another_path_with_the_secret_is_404_and_a_declared_oversized_body_413() {
        let other = check(
            "/other",
            &[("host", "127.0.0.1"), ("authorization", BEARER)],
        );
        assert_eq!(other.unwrap_err(), NOT_FOUND);
        let size = (MAX_BODY + 1).to_string();
        let large = check(
            "/mcp",
            &[
                ("host", "127.0.0.1"),
                ("authorization", BEARER),
                ("content-length", &size),
            ],
        );
        assert_eq!(large.unwrap_err(), TOO_LARGE);
    }

    #[test]
    fn the_secret_is_compared_whole() {
        let secret = Secret(SECRET.to_owned());
        assert!(secret.is(SECRET));
        assert!(!secret.is(&SECRET[1..]));
        assert!(!secret.is(""));
        assert!(!secret.is(&format!("{SECRET}0")));
    }
}
