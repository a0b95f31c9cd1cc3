//! Real-process tests of both transports: real PTYs, a real private tmux server, real `sh`.

mod pty;
mod replay;
mod support;
mod tmux;
