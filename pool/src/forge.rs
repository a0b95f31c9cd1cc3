//! A GitHub-compatible forge's REST API, the two calls `clawpool pr` needs: list the open pull
//! requests of a head branch (`GET /repos/{owner}/{repo}/pulls?head=owner:branch&state=open`)
//! and open one (`POST /repos/{owner}/{repo}/pulls`). GitHub, GitHub Enterprise (`api_url`
//! `https://HOST/api/v3`), Gitea and Forgejo (`https://HOST/api/v1`) serve both.
//!
//! The client is reqwest with rustls, which the workspace already has for the notifier's
//! webhooks: no new dependency, no OpenSSL. The token goes only in the `Authorization` header
//! of requests to `api_url`, and is never printed. A forge's refusal keeps the forge's own
//! message (and the messages of its `errors`), typed by status: 401, 404 and 422 each have a
//! kind of their own.

use std::time::Duration;

use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A forge repository and the token to reach it with.
pub struct Forge {
    client: reqwest::Client,
    api_url: String,
    owner: String,
    name: String,
    token: String,
}

/// What to open.
#[derive(Debug, Clone)]
pub struct NewPull {
    /// The head branch (in the forge's repository).
    pub branch: String,
    /// The branch to merge into.
    pub base: String,
    /// Its title.
    pub title: String,
    /// Its description (Markdown).
    pub body: String,
}

/// An open pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PullRequest {
    /// Its number.
    pub number: u64,
    /// Its page.
    pub url: String,
    /// Whether it was open already (found, not opened).
    pub existing: bool,
}

/// A forge that did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// 401: the token is missing, wrong or expired.
    #[error("the forge refused the token (401 Unauthorized): {message}")]
    Unauthorized {
        /// The forge's message.
        message: String,
    },
    /// 404: no such repository — or one the token may not see (GitHub answers 404 then too).
    #[error(
        "the forge has no repository {repository} that this token can see (404 Not Found): {message}"
    )]
    NotFound {
        /// `owner/name`.
        repository: String,
        /// The forge's message.
        message: String,
    },
    /// 422: the request was understood and refused (no commits between the branches, the
    /// head branch not on the forge, a pull request already open).
    #[error("the forge refused the pull request (422 Unprocessable Entity): {message}")]
    Unprocessable {
        /// The forge's message, with its errors' messages.
        message: String,
    },
    /// Any other status.
    #[error("the forge answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The forge's message, or its reply's start.
        message: String,
    },
    /// No answer (connection refused, DNS, timeout, TLS).
    #[error("the forge at {url} could not be reached: {reason}")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// Why.
        reason: String,
    },
    /// An answer that is not what the API documents.
    #[error("the forge's reply was not understood: {0}")]
    BadReply(String),
}

impl ForgeError {
    /// Its kind in JSON errors.
    pub fn kind(&self) -> &'static str {
        match self {
            ForgeError::Unauthorized { .. } => "forge_unauthorized",
            ForgeError::NotFound { .. } => "forge_not_found",
            ForgeError::Unprocessable { .. } => "forge_unprocessable",
            ForgeError::Status { .. } => "forge_error",
            ForgeError::Unreachable { .. } => "forge_unreachable",
            ForgeError::BadReply(_) => "forge_bad_reply",
        }
    }
}

/// A pull request as the API returns it (the fields used).
#[derive(Deserialize)]
struct PullReply {
    number: u64,
    html_url: String,
}

/// The body of a refusal: `{"message", "errors": [{"message"|"code", "field"}]}`.
#[derive(Deserialize)]
struct ErrorReply {
    message: String,
    #[serde(default)]
    errors: Vec<ErrorDetail>,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    field: Option<String>,
    #[serde(default)]
    code: Option<String>,
}

#[derive(Serialize)]
struct CreateBody<'a> {
    title: &'a str,
    head: &'a str,
    base: &'a str,
    body: &'a str,
}

impl Forge {
    /// The forge at `api_url` (no trailing `/`), repository `owner/name`, reached with `token`.
    pub fn new(api_url: &str, owner: &str, name: &str, token: String) -> Result<Self, ForgeError> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("clawpool/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ForgeError::Unreachable {
                url: api_url.to_owned(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            client,
            api_url: api_url.trim_end_matches('/').to_owned(),
            owner: owner.to_owned(),
            name: name.to_owned(),
            token,
        })
    }

    /// `owner/name`.
    pub fn repository(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    /// The open pull request of `new.branch`, or a new one: one pull request per branch however
    /// often it is asked.
    pub async fn find_or_open(&self, new: &NewPull) -> Result<PullRequest, ForgeError> {
        if let Some(found) = self.find_open(&new.branch).await? {
            return Ok(found);
        }
        let url = self.pulls_url()?;
        let body = serde_json::to_vec(&CreateBody {
            title: &new.title,
            head: &new.branch,
            base: &new.base,
            body: &new.body,
        })
        .map_err(|e| ForgeError::BadReply(e.to_string()))?;
        let reply = self
            .send(self.client.post(url.clone()).body(body), &url)
            .await?;
        let created: PullReply =
            serde_json::from_slice(&reply).map_err(|e| ForgeError::BadReply(e.to_string()))?;
        Ok(PullRequest {
            number: created.number,
            url: created.html_url,
            existing: false,
        })
    }

    /// The open pull request whose head is `branch` of this repository's owner, if any.
    async fn find_open(&self, branch: &str) -> Result<Option<PullRequest>, ForgeError> {
        let mut url = self.pulls_url()?;
        url.query_pairs_mut()
            .append_pair("head", &format!("{}:{branch}", self.owner))
            .append_pair("state", "open");
        let reply = self.send(self.client.get(url.clone()), &url).await?;
        let open: Vec<PullReply> =
            serde_json::from_slice(&reply).map_err(|e| ForgeError::BadReply(e.to_string()))?;
        Ok(open.into_iter().next().map(|pull| PullRequest {
            number: pull.number,
            url: pull.html_url,
            existing: true,
        }))
    }

    fn pulls_url(&self) -> Result<Url, ForgeError> {
        let text = format!("{}/repos/{}/{}/pulls", self.api_url, self.owner, self.name);
        Url::parse(&text).map_err(|e| ForgeError::Unreachable {
            url: text,
            reason: e.to_string(),
        })
    }

    /// Sends a request with the API's headers; a success status gives the body, any other
    /// the typed refusal.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        url: &Url,
    ) -> Result<Vec<u8>, ForgeError> {
        let unreachable = |e: reqwest::Error| ForgeError::Unreachable {
            // The URL without its query: nothing secret is in it, but it is long.
            url: format!("{}{}", url.origin().ascii_serialization(), url.path()),
            reason: e.to_string(),
        };
        let response = request
            .bearer_auth(&self.token)
            .header(reqwest::header::ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        let body = response.bytes().await.map_err(unreachable)?.to_vec();
        if status.is_success() {
            return Ok(body);
        }
        let message = refusal_message(&body);
        Err(match status {
            StatusCode::UNAUTHORIZED => ForgeError::Unauthorized { message },
            StatusCode::NOT_FOUND => ForgeError::NotFound {
                repository: self.repository(),
                message,
            },
            StatusCode::UNPROCESSABLE_ENTITY => ForgeError::Unprocessable { message },
            other => ForgeError::Status {
                status: other.as_u16(),
                message,
            },
        })
    }
}

/// The forge's message from a refusal's body: its `message`, then each error's message (or
/// field and code); the body's start when it is not the API's JSON.
fn refusal_message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorReply>(body) {
        Ok(reply) => {
            let details: Vec<String> = reply
                .errors
                .into_iter()
                .filter_map(|e| {
                    e.message.or(match (e.field, e.code) {
                        (Some(field), Some(code)) => Some(format!("{field} {code}")),
                        (None, Some(code)) => Some(code),
                        _ => None,
                    })
                })
                .collect();
            if details.is_empty() {
                reply.message
            } else {
                format!("{}: {}", reply.message, details.join("; "))
            }
        }
        Err(_) => String::from_utf8_lossy(body).chars().take(200).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_keeps_the_forges_message_and_its_errors() {
        let body = br#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"No commits between main and lanes/a"}],"documentation_url":"https://docs.github.com/rest"}"#;
        assert_eq!(
            refusal_message(body),
            "Validation Failed: No commits between main and lanes/a"
        );
        let body = br#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"head","code":"invalid"}]}"#;
        assert_eq!(refusal_message(body), "Validation Failed: head invalid");
        assert_eq!(
            refusal_message(br#"{"message":"Bad credentials"}"#),
            "Bad credentials"
        );
        assert_eq!(
            refusal_message(b"<html>gateway</html>"),
            "<html>gateway</html>"
        );
    }
}
