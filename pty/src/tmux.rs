//! tmux transport (being written).
pub struct TmuxServer;
#[derive(Debug, thiserror::Error)]
#[error("tmux")]
pub struct TmuxError;
pub(crate) struct TmuxTransport;
impl TmuxTransport {
    pub(crate) fn pid(&self) -> Option<u32> { None }
    pub(crate) fn socket_name(&self) -> &str { "" }
    pub(crate) fn session_name(&self) -> &str { "" }
    pub(crate) async fn send(&self, _hub: &crate::ScreenHub, _input: &crate::Input) -> Result<(), crate::WorkerError> { Ok(()) }
    pub(crate) async fn resize(&self, _size: crate::TermSize) -> Result<(), TmuxError> { Ok(()) }
    pub(crate) fn signal_group(&self, _signal: i32) {}
}
