# agentwire: build in the Rust image, run in a small Debian image.
#   docker build -t agentwire .
#   docker run -p 8080:8080 -v agentwire-data:/var/lib/agentwire agentwire
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin agentwire

FROM debian:bookworm-slim
# ca-certificates: TLS to model servers; curl: the health check.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/agentwire --create-home agentwire
COPY --from=build /src/target/release/agentwire /usr/local/bin/agentwire
USER agentwire
WORKDIR /var/lib/agentwire
# Agent files go in /var/lib/agentwire/agents (mount it); without it, `demo` only.
ENV AGENTWIRE_LISTEN=0.0.0.0:8080 \
    AGENTWIRE_DATABASE_URL=sqlite:///var/lib/agentwire/data/agentwire.db
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["agentwire"]
CMD ["serve"]
