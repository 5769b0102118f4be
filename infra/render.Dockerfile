# The render worker's container image: the `render` function with Debian's Chromium. Lambda runs
# the binary as a custom runtime (it speaks the Runtime API itself). Build from the project root
# for the architecture the template deploys (arm64):
#
#   docker buildx build --platform linux/arm64 -f infra/render.Dockerfile -t sarvcrawl-render .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p sarvcrawl-fn-render --bin render

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium ca-certificates fonts-liberation fonts-noto-cjk \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/render /usr/local/bin/render
# Lambda's file system is read-only but for /tmp, where the browser keeps its profile.
ENV SARVCRAWL_CHROMIUM=/usr/bin/chromium HOME=/tmp TMPDIR=/tmp
ENTRYPOINT ["/usr/local/bin/render"]
