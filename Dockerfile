# syntax=docker/dockerfile:1
#
# fleetdns image with docker, for those who build that way. `make image`
# (cmd/fleetdns-image: no daemon, amd64 and arm64) builds the image the tests
# run; this file gives the same shape: the static coredns binary with the
# same flags (test/deploy checks them against ociimage.LDFlags), uid/gid
# 65532 given by number so that runAsNonRoot can verify it, no shell, and no
# file capability (one fails to exec under capabilities drop ALL): port 53
# comes from the pod sysctl net.ipv4.ip_unprivileged_port_start.
#
#   docker build --build-arg VERSION=0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) \
#     -t ghcr.io/fleetdns/fleetdns:0.1.0 .

FROM golang:1.26.8-bookworm AS build
ARG VERSION=0.0.0-dev
ARG COMMIT=unknown
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/fleetdns/fleetdns/internal/version.Version=${VERSION} -X github.com/fleetdns/fleetdns/internal/version.Commit=${COMMIT} -X github.com/coredns/coredns/coremain.GitCommit=${COMMIT}" -o /out/coredns ./cmd/coredns

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=0.0.0-dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.revision=${COMMIT} \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.source=https://github.com/fleetdns/fleetdns
COPY --from=build /out/coredns /coredns
USER 65532:65532
EXPOSE 53 53/udp 9153
ENTRYPOINT ["/coredns"]
