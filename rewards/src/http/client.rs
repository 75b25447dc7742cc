//! A minimal HTTP/1.1 client for the scoring service: one `POST` of a JSON body per call, over
//! a plain TCP connection (`http://` only; a service behind TLS needs a local proxy), with a
//! deadline on the whole exchange so a server that hangs or trickles bytes cannot stall a run.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The most bytes of a response body read before the call fails (64 MiB).
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// An `http://host[:port][/path]` address, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    /// Host name or address.
    pub host: String,
    /// Port (80 when not given).
    pub port: u16,
    /// Path with its query (`/` when not given).
    pub path: String,
}

impl HttpUrl {
    /// Parses `url`; anything but `http://host[:port][/path]` is an error saying what was
    /// expected.
    pub fn parse(url: &str) -> Result<Self, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!(
                "{url:?}: expected an http:// address (https is not supported: use a local proxy)"
            )
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => {
                let port = p.parse::<u16>().map_err(|_| format!("{url:?}: bad port {p:?}"))?;
                (h.to_string(), port)
            }
            None => (authority.to_string(), 80),
        };
        if host.is_empty() {
            return Err(format!("{url:?}: no host"));
        }
        Ok(Self { host, port, path })
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The deadline passed (connecting, sending or waiting for the answer).
    Timeout(String),
    /// The connection failed or broke, or the answer was not HTTP.
    Transport(String),
    /// The server answered with a status other than 200.
    Status(u16, String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Timeout(m) => write!(f, "timed out: {m}"),
            Self::Transport(m) => write!(f, "{m}"),
            Self::Status(code, body) => write!(f, "HTTP status {code}: {body}"),
        }
    }
}

/// `POST`s `body` (JSON) to `url` and returns the response body of a 200 answer, all within
/// `timeout` from the call.
pub fn post_json(url: &HttpUrl, body: &[u8], timeout: Duration) -> Result<Vec<u8>, CallError> {
    let deadline = Instant::now() + timeout;
    let left = |what: &str| {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| CallError::Timeout(format!("{what} after {timeout:?}")))
    };
    let transport = |what: &str, e: std::io::Error| {
        if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) {
            CallError::Timeout(format!("{what} after {timeout:?}"))
        } else {
            CallError::Transport(format!("{what} {}:{}: {e}", url.host, url.port))
        }
    };
    let addrs = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| transport("cannot resolve", e))?
        .collect::<Vec<_>>();
    let addr = addrs
        .first()
        .ok_or_else(|| CallError::Transport(format!("{}:{}: no address", url.host, url.port)))?;
    let mut stream = TcpStream::connect_timeout(addr, left("connect")?)
        .map_err(|e| transport("connect to", e))?;
    stream.set_write_timeout(Some(left("send")?)).map_err(|e| transport("send to", e))?;
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\nUser-Agent: drift\r\n\r\n",
        url.path,
        url.host,
        url.port,
        body.len()
    );
    stream.write_all(head.as_bytes()).map_err(|e| transport("send to", e))?;
    stream.write_all(body).map_err(|e| transport("send to", e))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        stream
            .set_read_timeout(Some(left("waiting for the answer")?))
            .map_err(|e| transport("read from", e))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(transport("read from", e)),
        }
        if raw.len() > MAX_RESPONSE_BYTES + 64 * 1024 {
            return Err(CallError::Transport(format!(
                "answer over {MAX_RESPONSE_BYTES} bytes from {}:{}",
                url.host, url.port
            )));
        }
        if let Some(done) = complete_response(&raw) {
            raw.truncate(done);
            break;
        }
    }
    parse_response(&raw)
}

/// The length of a complete response at the start of `raw` when its head says how long the
/// body is (`Content-Length`) or its chunked body has ended, so the client need not wait for a
/// keep-alive server to close.
fn complete_response(raw: &[u8]) -> Option<usize> {
    let end = find(raw, b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    if header(head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let body = &raw[end..];
        return (body.ends_with(b"0\r\n\r\n") && dechunk(body).is_some()).then_some(raw.len());
    }
    let len = header(head, "content-length")?.parse::<usize>().ok()?;
    (raw.len() >= end + len).then_some(end + len)
}

/// The status and body of a whole response (`Content-Length`, chunked, or read to the close).
fn parse_response(raw: &[u8]) -> Result<Vec<u8>, CallError> {
    let bad = |m: &str| CallError::Transport(format!("not an HTTP answer: {m}"));
    let end = find(raw, b"\r\n\r\n").ok_or_else(|| bad("no end of headers"))? + 4;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("headers not UTF-8"))?;
    let status_line = head.lines().next().unwrap_or("");
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(bad(&format!("status line {status_line:?}")));
    }
    let code = parts
        .next()
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| bad(&format!("status line {status_line:?}")))?;
    let rest = &raw[end..];
    let body =
        if header(head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            dechunk(rest).ok_or_else(|| bad("broken chunked body"))?
        } else if let Some(len) = header(head, "content-length") {
            let len = len.parse::<usize>().map_err(|_| bad("bad Content-Length"))?;
            if rest.len() < len {
                return Err(CallError::Transport(format!(
                    "answer cut short: {} of {len} body bytes",
                    rest.len()
                )));
            }
            rest[..len].to_vec()
        } else {
            rest.to_vec()
        };
    if code != 200 {
        let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        return Err(CallError::Status(code, text));
    }
    Ok(body)
}

/// The value of header `name` (lower case) in `head`.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The body of a chunked transfer encoding.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = find(rest, b"\r\n")?;
        let size_text = std::str::from_utf8(&rest[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        if rest.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_what_was_expected() {
        let u = HttpUrl::parse("http://127.0.0.1:18085/score?x=1").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("127.0.0.1", 18085, "/score?x=1"));
        let u = HttpUrl::parse("http://localhost").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        assert!(HttpUrl::parse("https://x/").unwrap_err().contains("https is not supported"));
        assert!(HttpUrl::parse("http://x:99999/").unwrap_err().contains("bad port"));
        assert!(HttpUrl::parse("http://:80/").unwrap_err().contains("no host"));
    }

    #[test]
    fn responses_parse_by_length_chunks_or_close() {
        let by_len = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhixx";
        assert_eq!(parse_response(by_len).unwrap(), b"hi");
        assert_eq!(complete_response(by_len), Some(by_len.len() - 2));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n3\r\n th\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), b"hi th");
        assert_eq!(complete_response(chunked), Some(chunked.len()));
        assert_eq!(complete_response(&chunked[..chunked.len() - 7]), None);
        let closed = b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\n{\"a\":1}";
        assert_eq!(parse_response(closed).unwrap(), b"{\"a\":1}");
        match parse_response(b"HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nboom") {
            Err(CallError::Status(500, body)) => assert_eq!(body, "boom"),
            other => panic!("{other:?}"),
        }
        assert!(parse_response(b"garbage\r\n\r\n")
            .unwrap_err()
            .to_string()
            .contains("status line"));
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc";
        assert!(parse_response(short).unwrap_err().to_string().contains("cut short"));
    }
}
