//! `clawpool-forge-double`: a scripted GitHub-compatible forge, the test double at the edge for
//! `clawpool pr`. It serves the two pull-request calls of GitHub's REST API on 127.0.0.1 —
//! `GET /repos/{owner}/{repo}/pulls?head=owner:branch&state=open` and
//! `POST /repos/{owner}/{repo}/pulls` — for one repository whose git side is a bare repository
//! made by the test, and answers as GitHub does:
//!
//! - 401 `Bad credentials` unless the request carries `Authorization: Bearer TOKEN`;
//! - 404 `Not Found` for any other repository or path;
//! - 422 `Validation Failed` when the head or base branch is not in the bare repository, when
//!   there are no commits between them, or when an open pull request has that head already;
//! - 201 with `number` and `html_url` for a pull request it opens, 200 with the list for a
//!   search.
//!
//! Every request is appended to the `--record` file as a JSON line (`method`, `path`, `query`,
//! `authorization`, `accept`, `body`) before it is answered. The first line on stdout is
//! `listening on 127.0.0.1:PORT`.
//!
//! Usage: `clawpool-forge-double --repository OWNER/NAME --bare PATH --token TOKEN
//! --record FILE`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;

use serde::Deserialize;
use serde_json::{Value, json};

struct Forge {
    owner: String,
    name: String,
    bare: PathBuf,
    token: String,
    record: PathBuf,
    port: u16,
    pulls: Vec<Pull>,
}

struct Pull {
    number: u64,
    head: String,
    base: String,
}

/// A request, as far as this forge reads it.
struct Request {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Deserialize)]
struct CreatePull {
    title: String,
    head: String,
    base: String,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut repository, mut bare, mut token, mut record) = (None, None, None, None);
    while let Some(flag) = args.next() {
        let value = args.next();
        match (flag.as_str(), value) {
            ("--repository", Some(v)) => repository = Some(v),
            ("--bare", Some(v)) => bare = Some(PathBuf::from(v)),
            ("--token", Some(v)) => token = Some(v),
            ("--record", Some(v)) => record = Some(PathBuf::from(v)),
            (other, _) => {
                eprintln!("clawpool-forge-double: unknown or incomplete flag {other}");
                std::process::exit(2);
            }
        }
    }
    let (Some(repository), Some(bare), Some(token), Some(record)) =
        (repository, bare, token, record)
    else {
        eprintln!(
            "usage: clawpool-forge-double --repository OWNER/NAME --bare PATH --token TOKEN --record FILE"
        );
        std::process::exit(2);
    };
    let Some((owner, name)) = repository.split_once('/') else {
        eprintln!("clawpool-forge-double: --repository is OWNER/NAME");
        std::process::exit(2);
    };
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local address").port();
    println!("listening on 127.0.0.1:{port}");
    let _ = std::io::stdout().flush();
    let mut forge = Forge {
        owner: owner.to_owned(),
        name: name.to_owned(),
        bare,
        token,
        record,
        port,
        pulls: Vec::new(),
    };
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if let Err(err) = forge.serve(stream) {
            eprintln!("clawpool-forge-double: {err}");
        }
    }
}

impl Forge {
    /// One request on one connection (answered with `Connection: close`).
    fn serve(&mut self, stream: TcpStream) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream.try_clone()?);
        let Some(request) = read_request(&mut reader)? else {
            return Ok(());
        };
        self.record(&request)?;
        let (status, reply) = self.answer(&request);
        eprintln!("{} {} -> {status}", request.method, request.path);
        let body = reply.to_string();
        let reason = match status {
            200 => "OK",
            201 => "Created",
            401 => "Unauthorized",
            404 => "Not Found",
            _ => "Unprocessable Entity",
        };
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        stream.flush()
    }

    fn record(&self, request: &Request) -> std::io::Result<()> {
        let line = json!({
            "method": request.method,
            "path": request.path,
            "query": request.query.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
            "authorization": request.header("authorization"),
            "accept": request.header("accept"),
            "body": serde_json::from_slice::<Value>(&request.body).unwrap_or(Value::Null),
        });
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.record)?;
        writeln!(file, "{line}")
    }

    fn answer(&mut self, request: &Request) -> (u16, Value) {
        let docs = "https://docs.github.com/rest";
        if request.header("authorization") != Some(&format!("Bearer {}", self.token)) {
            return (
                401,
                json!({"message": "Bad credentials", "documentation_url": docs}),
            );
        }
        let pulls = format!("/repos/{}/{}/pulls", self.owner, self.name);
        if request.path != pulls {
            return (
                404,
                json!({"message": "Not Found", "documentation_url": docs}),
            );
        }
        match request.method.as_str() {
            "GET" => {
                let wanted = |key: &str| {
                    request
                        .query
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, v)| v.as_str())
                };
                let head = wanted("head").and_then(|h| h.split_once(':'));
                let open: Vec<Value> = self
                    .pulls
                    .iter()
                    .filter(|p| {
                        head.is_none_or(|(owner, branch)| owner == self.owner && branch == p.head)
                    })
                    .map(|p| self.pull_json(p))
                    .collect();
                (200, Value::Array(open))
            }
            "POST" => {
                let Ok(create) = serde_json::from_slice::<CreatePull>(&request.body) else {
                    return (
                        422,
                        json!({"message": "Invalid request.", "documentation_url": docs}),
                    );
                };
                let invalid = |field: &str| {
                    (
                        422,
                        json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "field": field, "code": "invalid"}], "documentation_url": docs}),
                    )
                };
                let (Some(head), Some(base)) =
                    (self.branch(&create.head), self.branch(&create.base))
                else {
                    return invalid(if self.branch(&create.head).is_none() {
                        "head"
                    } else {
                        "base"
                    });
                };
                if self.pulls.iter().any(|p| p.head == create.head) {
                    return (
                        422,
                        json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom", "message": format!("A pull request already exists for {}:{}.", self.owner, create.head)}], "documentation_url": docs}),
                    );
                }
                if self.commits_between(&base, &head) == 0 {
                    return (
                        422,
                        json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom", "message": format!("No commits between {} and {}", create.base, create.head)}], "documentation_url": docs}),
                    );
                }
                let pull = Pull {
                    number: self.pulls.len() as u64 + 1,
                    head: create.head,
                    base: create.base,
                };
                let mut reply = self.pull_json(&pull);
                reply["title"] = create.title.into();
                self.pulls.push(pull);
                (201, reply)
            }
            _ => (
                404,
                json!({"message": "Not Found", "documentation_url": docs}),
            ),
        }
    }

    fn pull_json(&self, pull: &Pull) -> Value {
        json!({
            "number": pull.number,
            "state": "open",
            "html_url": format!("http://127.0.0.1:{}/{}/{}/pull/{}", self.port, self.owner, self.name, pull.number),
            "head": {"ref": pull.head},
            "base": {"ref": pull.base},
        })
    }

    /// The commit branch `name` has in the bare repository.
    fn branch(&self, name: &str) -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.bare)
            .args(["rev-parse", "--verify", "-q"])
            .arg(format!("refs/heads/{name}"))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn commits_between(&self, base: &str, head: &str) -> u64 {
        Command::new("git")
            .arg("-C")
            .arg(&self.bare)
            .args(["rev-list", "--count"])
            .arg(format!("{base}..{head}"))
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .unwrap_or(0)
    }
}

/// Reads one HTTP/1.1 request: the request line, the headers, and a `Content-Length` body.
fn read_request(reader: &mut impl BufRead) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect();
    Ok(Some(Request {
        method,
        path: path.to_owned(),
        query,
        headers,
        body,
    }))
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
