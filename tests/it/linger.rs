//! A body refused before it was read (413 over a limit) is read and
//! dropped after the answer, so a client that sends its whole body before
//! it reads (Python's `httpx`) gets the 413, not a connection reset that
//! the unread bytes would cause.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use crate::support::*;

/// Sends `head` and all of `body` (in pieces), then reads the answer's status line and
/// headers (the connection is `close`: the server ends it after).
async fn whole_then_read(server: &Server, head: String, body: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    // A piece at a time, as a client streaming a file does: the answer is
    // sent before the last piece goes out.
    for piece in body.chunks(64 << 10) {
        stream
            .write_all(piece)
            .await
            .expect("the server reads the refused body: every byte goes out");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    stream.flush().await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        stream.read_to_end(&mut answer),
    );
    read.await
        .expect("the answer comes")
        .expect("no reset before the answer is read");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_body_over_the_limit_sent_whole_still_gets_its_413() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            max_file_bytes: Some(300_000),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    // A JSON route over max_message_bytes, refused by its declared length.
    let body = vec![b' '; 3 << 20];
    let head = format!(
        "POST /v1/chats HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        server.addr,
        body.len()
    );
    let answer = whole_then_read(&server, head, &body).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("SCHEMA_VALIDATION_FAILED"), "{answer}");

    // An upload over max_file_bytes: refused up front by its length, and
    // when it comes chunked, where the limit is crossed.
    let chat = Uuid::new_v4();
    let file = vec![b'a'; 2 << 20];
    let head = format!(
        "POST /v1/chats/{chat}/files?name=notes.txt HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.addr,
        file.len()
    );
    let answer = whole_then_read(&server, head, &file).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let mut chunked = Vec::new();
    for piece in file.chunks(64 << 10) {
        chunked.extend(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend(piece);
        chunked.extend(b"\r\n");
    }
    chunked.extend(b"0\r\n\r\n");
    let head = format!(
        "POST /v1/chats/{chat}/files?name=notes.txt HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        server.addr
    );
    let answer = whole_then_read(&server, head, &chunked).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // The server is well: a file within the limit goes in.
    let small = b"three words here\n";
    let head = format!(
        "POST /v1/chats/{chat}/files?name=notes.txt HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.addr,
        small.len()
    );
    let answer = whole_then_read(&server, head, small).await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
}

#[tokio::test]
async fn a_client_waiting_for_100_continue_is_refused_without_an_invitation() {
    let server = Server::start_with(Opts {
        settings: agentwire::config::Settings {
            max_file_bytes: Some(300_000),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    // An upload whose declared length is over the limit is refused before
    // its body is asked for (curl sends `Expect` for a large body).
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /v1/chats/{}/files?name=notes.txt HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: text/plain\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\
         Connection: close\r\n\r\n",
        Uuid::new_v4(),
        server.addr,
        2 << 20
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // The body is never sent: the server must not ask for it, only answer.
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        stream.read_to_end(&mut answer),
    );
    read.await.expect("the answer comes").unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");
}
