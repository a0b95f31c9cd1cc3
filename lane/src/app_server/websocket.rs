//! The smallest WebSocket client the app server's Unix socket needs (RFC 6455, client side):
//! the opening handshake, masked text frames out, text frames in (fragmented or not), pongs
//! for pings, and the close frame as the end. Codex 0.169.0 speaks WebSocket on its Unix
//! listener too, not bare JSON lines.

use std::io::Read;
use std::path::Path;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// The largest message taken (the server's own announced limit is 16 MiB).
const MAX_MESSAGE: u64 = 16 << 20;

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// One open WebSocket connection over a Unix socket.
pub struct WebSocket {
    stream: BufReader<UnixStream>,
}

impl WebSocket {
    /// Connects to the socket at `path` and upgrades the connection.
    pub async fn connect(path: &Path) -> std::io::Result<Self> {
        let stream = UnixStream::connect(path).await?;
        let mut stream = BufReader::new(stream);
        let key = base64(&random_bytes::<16>()?);
        stream
            .get_mut()
            .write_all(
                format!(
                    "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
                     Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n\
                     Sec-WebSocket-Version: 13\r\n\r\n"
                )
                .as_bytes(),
            )
            .await?;
        let mut status = String::new();
        stream.read_line(&mut status).await?;
        if !status.starts_with("HTTP/1.1 101") {
            return Err(std::io::Error::other(format!(
                "the server refused the WebSocket upgrade: {}",
                status.trim()
            )));
        }
        loop {
            let mut header = String::new();
            if stream.read_line(&mut header).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            if header == "\r\n" {
                return Ok(Self { stream });
            }
        }
    }

    /// The process at the other end of the socket (the server that listens on it).
    pub fn peer_pid(&self) -> std::io::Result<i32> {
        self.stream
            .get_ref()
            .peer_cred()?
            .pid()
            .ok_or_else(|| std::io::Error::other("the socket's peer has no process id"))
    }

    /// Sends `text` as one text frame.
    pub async fn send_text(&mut self, text: &str) -> std::io::Result<()> {
        self.send_frame(OP_TEXT, text.as_bytes()).await
    }

    /// The next text message; `None` once the server closed the connection.
    pub async fn next_text(&mut self) -> std::io::Result<Option<String>> {
        let mut message = Vec::new();
        loop {
            let mut head = [0u8; 2];
            match self.stream.read_exact(&mut head).await {
                Ok(_) => {}
                Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(err) => return Err(err),
            }
            let (fin, opcode) = (head[0] & 0x80 != 0, head[0] & 0x0F);
            let len = match head[1] & 0x7F {
                126 => u64::from(self.stream.read_u16().await?),
                127 => self.stream.read_u64().await?,
                short => u64::from(short),
            };
            // A server never masks its frames; a masked one is read past all the same.
            let mask = if head[1] & 0x80 != 0 {
                let mut mask = [0u8; 4];
                self.stream.read_exact(&mut mask).await?;
                Some(mask)
            } else {
                None
            };
            if len + message.len() as u64 > MAX_MESSAGE {
                return Err(std::io::Error::other(format!(
                    "a message of more than {MAX_MESSAGE} bytes"
                )));
            }
            let mut payload = vec![0u8; len as usize];
            self.stream.read_exact(&mut payload).await?;
            if let Some(mask) = mask {
                apply_mask(&mut payload, mask);
            }
            match opcode {
                OP_TEXT | OP_CONTINUATION => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return String::from_utf8(message)
                            .map(Some)
                            .map_err(std::io::Error::other);
                    }
                }
                OP_PING => self.send_frame(OP_PONG, &payload).await?,
                OP_CLOSE => return Ok(None),
                // Pongs and binary frames carry nothing the lane reads.
                _ => {}
            }
        }
    }

    async fn send_frame(&mut self, opcode: u8, payload: &[u8]) -> std::io::Result<()> {
        let mut frame = vec![0x80 | opcode];
        match payload.len() {
            len @ 0..=125 => frame.push(0x80 | len as u8),
            len @ 126..=0xFFFF => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(len as u16).to_be_bytes());
            }
            len => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        // A client masks every frame it sends (RFC 6455, 5.3).
        let mask = random_bytes::<4>()?;
        frame.extend_from_slice(&mask);
        let start = frame.len();
        frame.extend_from_slice(payload);
        apply_mask(&mut frame[start..], mask);
        self.stream.get_mut().write_all(&frame).await
    }
}

fn apply_mask(payload: &mut [u8], mask: [u8; 4]) {
    for (i, byte) in payload.iter_mut().enumerate() {
        *byte ^= mask[i % 4];
    }
}

fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Standard base64 with padding (the handshake's key).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 0x3F) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_pads_like_the_standard() {
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xFF; 16]), "/////////////////////w==");
    }

    /// Against a server written here: the upgrade, a masked text out, a fragmented text in
    /// with a ping between its fragments (answered with a pong), then the close.
    #[tokio::test]
    async fn talks_to_a_websocket_server() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ws.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            let mut stream = BufReader::new(stream);
            let mut request = String::new();
            while !request.ends_with("\r\n\r\n") {
                stream.read_line(&mut request).await.expect("request");
            }
            assert!(request.contains("Upgrade: websocket"), "{request}");
            let out = stream.get_mut();
            out.write_all(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n")
                .await
                .expect("upgrade");
            // The client's text, masked.
            let mut head = [0u8; 6];
            stream.read_exact(&mut head).await.expect("frame head");
            assert_eq!(head[0], 0x81);
            assert_eq!(head[1], 0x80 | 5);
            let mut body = [0u8; 5];
            stream.read_exact(&mut body).await.expect("frame body");
            apply_mask(&mut body, [head[2], head[3], head[4], head[5]]);
            assert_eq!(&body, b"hello");
            let out = stream.get_mut();
            out.write_all(&[0x01, 3]).await.expect("first fragment");
            out.write_all(b"wor").await.expect("first fragment");
            out.write_all(&[0x89, 1, b'p']).await.expect("ping");
            out.write_all(&[0x80, 2]).await.expect("last fragment");
            out.write_all(b"ld").await.expect("last fragment");
            let mut pong = [0u8; 7];
            stream.read_exact(&mut pong).await.expect("pong");
            assert_eq!(pong[0], 0x8A);
            stream.get_mut().write_all(&[0x88, 0]).await.expect("close");
        });
        let mut socket = WebSocket::connect(&path).await.expect("connect");
        socket.send_text("hello").await.expect("send");
        assert_eq!(
            socket.next_text().await.expect("read").as_deref(),
            Some("world")
        );
        assert_eq!(socket.next_text().await.expect("read"), None);
        server.await.expect("server");
    }
}
