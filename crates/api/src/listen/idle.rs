//! When a connection is idle: no request of it is in flight. A request is in flight from the
//! moment its head has been read (the service is called) until its response body has been sent
//! or dropped, so an open watch stream keeps its connection busy however quiet it is.
//!
//! [`Tracked`] wraps the app of one connection and counts its requests; [`expired`] resolves
//! once the connection has stayed idle past its deadline: the first deadline is set at accept
//! (the TLS handshake and the first request head must come before it), each later one
//! `idle_timeout` after the last response ended.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::Request;
use axum::response::Response;
use futures::future::BoxFuture;
use http_body::{Frame, SizeHint};
use tokio::sync::watch;
use tokio::time::Instant;

/// Requests of a connection: how many are in flight, and how many ever started.
#[derive(Debug, Clone, Copy, Default)]
struct Load {
    in_flight: usize,
    started: u64,
}

/// The request count of one connection.
#[derive(Debug, Clone)]
pub(super) struct Activity(Arc<watch::Sender<Load>>);

impl Activity {
    pub(super) fn new() -> Activity {
        Activity(Arc::new(watch::Sender::new(Load::default())))
    }

    fn begin(&self) -> InFlight {
        self.0.send_modify(|l| {
            l.in_flight += 1;
            l.started += 1;
        });
        InFlight(self.clone())
    }

    /// Resolves once no request has been in flight since `deadline`, and then since
    /// `idle` after each response that ended.
    pub(super) async fn expired(&self, mut deadline: Instant, idle: Duration) {
        let mut rx = self.0.subscribe();
        loop {
            let seen = rx.borrow_and_update().started;
            let woke = tokio::time::timeout_at(
                deadline,
                rx.wait_for(|l| l.in_flight > 0 || l.started != seen),
            )
            .await
            .is_ok();
            if !woke {
                return;
            }
            // Busy: the clock starts again when the last request in flight has ended. (The
            // sender lives as long as `self`, so waiting cannot fail.)
            let _ = rx.wait_for(|l| l.in_flight == 0).await;
            deadline = Instant::now() + idle;
        }
    }
}

/// One request in flight; it ends when this is dropped.
struct InFlight(Activity);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0
            .0
            .send_modify(|l| l.in_flight = l.in_flight.saturating_sub(1));
    }
}

/// The app of one connection, counting its requests into an [`Activity`].
#[derive(Clone)]
pub(super) struct Tracked {
    pub(super) app: Router,
    pub(super) activity: Activity,
}

impl<B> tower::Service<Request<B>> for Tracked
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let in_flight = self.activity.begin();
        let call = tower::ServiceExt::oneshot(self.app.clone(), req);
        Box::pin(async move {
            let resp = call.await?;
            Ok(resp.map(|inner| {
                Body::new(Counted {
                    inner,
                    _in_flight: in_flight,
                })
            }))
        })
    }
}

/// A response body that keeps its request in flight until it is sent or dropped.
struct Counted {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_from_the_deadline_then_after_each_response() {
        let activity = Activity::new();
        let start = Instant::now();
        // Nothing ever starts: expired at the first deadline.
        activity
            .expired(start + Duration::from_secs(3), Duration::from_secs(5))
            .await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));

        // A request runs from 1 s to 4 s: expired 5 s after it ended.
        let start = Instant::now();
        let a = activity.clone();
        let job = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let r = a.begin();
            tokio::time::sleep(Duration::from_secs(3)).await;
            drop(r);
        });
        activity
            .expired(start + Duration::from_secs(2), Duration::from_secs(5))
            .await;
        assert_eq!(start.elapsed(), Duration::from_secs(9));
        job.await.unwrap();

        // A request that starts and ends at once still counts as activity.
        let start = Instant::now();
        let a = activity.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(a.begin());
        });
        activity
            .expired(start + Duration::from_secs(2), Duration::from_secs(5))
            .await;
        assert_eq!(start.elapsed(), Duration::from_secs(6));
    }
}
