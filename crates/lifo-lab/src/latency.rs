//! A loopback TCP proxy that adds a fixed delay to every request: what a
//! round trip to DynamoDB in a region costs, in front of DynamoDB Local,
//! whose own answers take well under a millisecond. With it, a benchmark
//! shows what the client's concurrency achieves when each request takes
//! time, instead of DynamoDB Local's CPU ceiling.
//!
//! Each chunk the client sends waits `delay` before it is forwarded (an SDK
//! request is one chunk, so one delay per request); answers flow back at
//! once. Stops when dropped.

use anyhow::{Context, Result};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running proxy.
pub struct LatencyProxy {
    /// `http://127.0.0.1:PORT`: use it as the endpoint instead of the
    /// upstream's.
    pub endpoint: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LatencyProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LatencyProxy {
    /// Proxies to `upstream` (`http://127.0.0.1:PORT`), delaying requests.
    pub async fn start(upstream: &str, delay: Duration) -> Result<Self> {
        let target = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the latency proxy")?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let target = target.clone();
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let up = async {
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            let n = match cr.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            tokio::time::sleep(delay).await;
                            if sw.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    };
                    let down = async {
                        let _ = tokio::io::copy(&mut sr, &mut cw).await;
                    };
                    // Either side closing ends the connection for both:
                    // a client left connected to a server that closed
                    // (DynamoDB Local drops idle connections) would send
                    // its next request into the void and wait forever.
                    tokio::select! {
                        () = up => {}
                        () = down => {}
                    }
                });
            }
        });
        Ok(Self { endpoint, task })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn every_request_waits_the_delay_and_answers_come_back() {
        // An echo server behind the proxy.
        let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = format!("http://{}", echo.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let proxy = LatencyProxy::start(&upstream, Duration::from_millis(30))
            .await
            .unwrap();
        let mut s = tokio::net::TcpStream::connect(proxy.endpoint.trim_start_matches("http://"))
            .await
            .unwrap();
        for msg in [b"one".as_slice(), b"two"] {
            let started = Instant::now();
            s.write_all(msg).await.unwrap();
            let mut back = [0u8; 3];
            s.read_exact(&mut back).await.unwrap();
            assert_eq!(&back, msg);
            assert!(started.elapsed() >= Duration::from_millis(30));
        }
    }

    #[tokio::test]
    async fn a_server_that_closes_closes_the_client_too() {
        // A server that answers once, then closes (as DynamoDB Local does
        // with idle connections): the client must see the end, not wait.
        let once = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = format!("http://{}", once.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = once.accept().await {
                let mut buf = [0u8; 3];
                let _ = s.read_exact(&mut buf).await;
                let _ = s.write_all(&buf).await;
            }
        });
        let proxy = LatencyProxy::start(&upstream, Duration::from_millis(5))
            .await
            .unwrap();
        let mut s = tokio::net::TcpStream::connect(proxy.endpoint.trim_start_matches("http://"))
            .await
            .unwrap();
        s.write_all(b"one").await.unwrap();
        let mut back = [0u8; 3];
        s.read_exact(&mut back).await.unwrap();
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
        assert!(matches!(closed, Ok(Ok(0))), "{closed:?}");
    }
}
