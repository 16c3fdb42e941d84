//! Connection plumbing: a write-stall timeout around a stream (a client
//! that stops reading its response cannot hold the connection forever),
//! and the response body, which can hold a `--web.max-requests` slot
//! until it has been handed to the connection.

use hyper::body::{Bytes, Frame, SizeHint};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;

/// A stream whose writes fail with `TimedOut` when one stays blocked
/// (the peer not reading) for longer than `limit`.
#[derive(Debug)]
pub(super) struct StallTimeout<S> {
    inner: S,
    limit: Duration,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> StallTimeout<S> {
    /// Wraps `inner`.
    pub(super) fn new(inner: S, limit: Duration) -> Self {
        StallTimeout {
            inner,
            limit,
            timer: None,
        }
    }

    /// The wrapped stream.
    pub(super) fn get_ref(&self) -> &S {
        &self.inner
    }

    fn blocked<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let t = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match t.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading the response",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<T>(&mut self, r: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(v) => {
                self.timer = None;
                Poll::Ready(v)
            }
            Poll::Pending => self.blocked(cx),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for StallTimeout<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for StallTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.progress(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.progress(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.progress(r, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.progress(r, cx)
    }
}

/// A whole response body, optionally holding a `--web.max-requests` slot
/// that is released when the body has been handed over (or dropped).
#[derive(Debug, Default)]
pub(super) struct Body {
    data: Option<Bytes>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Body {
    /// A body of `data`.
    pub(super) fn new(data: impl Into<Bytes>) -> Self {
        let data: Bytes = data.into();
        Body {
            data: (!data.is_empty()).then_some(data),
            permit: None,
        }
    }

    /// Holds `permit` until the body is sent.
    pub(super) fn holding(mut self, permit: Option<OwnedSemaphorePermit>) -> Self {
        self.permit = permit;
        self
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        match this.data.take() {
            Some(d) => Poll::Ready(Some(Ok(Frame::data(d)))),
            None => {
                this.permit = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}
