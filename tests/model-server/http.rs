//! Just enough HTTP/1.1 for the agents' HTTP clients: read one request (with a
//! `Content-Length` or chunked body) and write length-delimited or chunked
//! responses.
//!
//! Hand-written rather than a framework because the test double needs to misbehave
//! on purpose (close without answering, stall mid-stream) in ways frameworks make
//! awkward, and because it keeps the test binary's dependency tree small.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest request line or header line accepted; real clients stay far below it.
const MAX_LINE: usize = 16 * 1024;
/// Most header lines accepted in one request.
const MAX_HEADERS: usize = 200;
/// Largest request body accepted. Claude Code's requests (system prompt plus tool
/// schemas plus the conversation) are a few hundred KB; this leaves ample room.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One parsed HTTP request.
#[derive(Debug)]
pub struct Request {
    /// The method, as sent (`POST`, `GET`, `HEAD`, ...).
    pub method: String,
    /// The request target: path plus query string, e.g. `/v1/messages?beta=true`.
    pub target: String,
    /// Header names lower-cased, values trimmed, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The decoded body (chunked encoding removed).
    pub body: Vec<u8>,
    /// Whether the client allows the connection to carry another request.
    pub keep_alive: bool,
}

impl Request {
    /// The value of the first header with this (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The target without its query string.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads one line ending in LF, without the line ending. `Ok(None)` on a clean EOF
/// before any byte, which is how an idle keep-alive connection ends.
async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    // `take` bounds the read so a client that never sends LF cannot grow `buf` forever.
    let n = (&mut *reader)
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)
        .await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(bad("header line too long or truncated"));
    }
    while matches!(buf.last(), Some(b'\n' | b'\r')) {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| bad("header line is not UTF-8"))
}

/// Reads the next request from a connection. `Ok(None)` when the client closed the
/// connection between requests.
pub async fn read_request<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Option<Request>> {
    // Tolerate stray blank lines between requests, as RFC 9112 asks servers to.
    let request_line = loop {
        match read_line(reader).await? {
            None => return Ok(None),
            Some(line) if line.is_empty() => continue,
            Some(line) => break line,
        }
    };
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(format!("malformed request line {request_line:?}")));
    };
    let (method, target, version) = (method.to_owned(), target.to_owned(), version.to_owned());

    let mut headers = Vec::new();
    loop {
        let line = read_line(reader)
            .await?
            .ok_or_else(|| bad("connection closed inside the headers"))?;
        if line.is_empty() {
            break;
        }
        if headers.len() >= MAX_HEADERS {
            return Err(bad("too many headers"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad(format!("malformed header {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }

    let mut request = Request {
        method,
        target,
        headers,
        body: Vec::new(),
        keep_alive: false,
    };
    let connection = request.header("connection").map(str::to_ascii_lowercase);
    request.keep_alive = match version.as_str() {
        "HTTP/1.0" => connection.as_deref() == Some("keep-alive"),
        _ => connection.as_deref() != Some("close"),
    };

    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        request.body = read_chunked_body(reader).await?;
    } else if let Some(len) = request.header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad content-length {len:?}")))?;
        if len > MAX_BODY {
            return Err(bad("request body too large"));
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body).await?;
        request.body = body;
    }
    Ok(Some(request))
}

async fn read_chunked_body<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let size_line = read_line(reader)
            .await?
            .ok_or_else(|| bad("connection closed inside a chunked body"))?;
        // Chunk extensions (`;name=value`) carry nothing we need.
        let size_hex = size_line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| bad(format!("bad chunk size {size_line:?}")))?;
        if size == 0 {
            // Trailer section: header lines up to a blank line.
            while let Some(line) = read_line(reader).await? {
                if line.is_empty() {
                    break;
                }
            }
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(bad("request body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).await?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf).await?;
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

fn head(status: u16, content_type: &str, extra: &[(&str, String)], framing: &str) -> String {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\n{framing}\r\n",
        reason(status)
    );
    for (name, value) in extra {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out
}

/// Writes a complete response with a `Content-Length` body. For `HEAD` requests pass
/// `with_body: false`: the length is announced but no body follows.
pub async fn write_full<W: AsyncWrite + Unpin>(
    writer: &mut W,
    status: u16,
    content_type: &str,
    extra: &[(&str, String)],
    body: &[u8],
    with_body: bool,
) -> io::Result<()> {
    let framing = format!("content-length: {}", body.len());
    let mut out = head(status, content_type, extra, &framing).into_bytes();
    if with_body {
        out.extend_from_slice(body);
    }
    writer.write_all(&out).await?;
    writer.flush().await
}

/// A response body sent in chunks as it is produced, so the client sees each
/// server-sent event the moment it is written.
pub struct Chunked<'a, W> {
    writer: &'a mut W,
}

impl<'a, W: AsyncWrite + Unpin> Chunked<'a, W> {
    /// Writes the status line and headers, announcing a chunked body.
    pub async fn start(
        writer: &'a mut W,
        status: u16,
        content_type: &str,
        extra: &[(&str, String)],
    ) -> io::Result<Self> {
        let out = head(status, content_type, extra, "transfer-encoding: chunked");
        writer.write_all(out.as_bytes()).await?;
        writer.flush().await?;
        Ok(Self { writer })
    }

    /// Sends one chunk and flushes it.
    pub async fn send(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            // An empty chunk would mean end-of-body.
            return Ok(());
        }
        let mut out = format!("{:x}\r\n", data.len()).into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        self.writer.write_all(&out).await?;
        self.writer.flush().await
    }

    /// Ends the body, leaving the connection usable for the next request.
    pub async fn finish(self) -> io::Result<()> {
        self.writer.write_all(b"0\r\n\r\n").await?;
        self.writer.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn parses_content_length_and_chunked_requests() {
        let raw = b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}\
POST /v1/responses HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let mut reader = tokio::io::BufReader::new(&raw[..]);
        let first = read_request(&mut reader)
            .await
            .expect("first request parses")
            .expect("first request present");
        assert_eq!(first.method, "POST");
        assert_eq!(first.path(), "/v1/messages");
        assert_eq!(first.body, b"{}");
        assert!(first.keep_alive);
        let second = read_request(&mut reader)
            .await
            .expect("second request parses")
            .expect("second request present");
        assert_eq!(second.body, b"abcde");
        assert!(!second.keep_alive);
        assert!(
            read_request(&mut reader)
                .await
                .expect("clean EOF")
                .is_none()
        );
    }
}
