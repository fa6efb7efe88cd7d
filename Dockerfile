# syntax=docker/dockerfile:1
#
# fleetdns image: one static coredns binary on distroless, run as nonroot,
# binding port 53 through the file capability cap_net_bind_service.
#
#   docker build -t ghcr.io/fleetdns/fleetdns:0.1.0 .
#
# The build stage uses the flags of `make build` (Makefile: GOBUILD_FLAGS,
# CGO_ENABLED=0); test/deploy builds the binary with the flags read from the
# RUN line below and checks that it is static and serves.

FROM golang:1.26.8-bookworm AS build
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/coredns ./cmd/coredns
# Port 53 as a non-root user: the binary, not the container, carries the
# capability (Kubernetes adds NET_BIND_SERVICE to the container's bounding and
# permitted sets; only a file capability makes it effective for a non-root
# process, and no_new_privs still allows it because it is not a gain).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcap2-bin \
 && setcap cap_net_bind_service=+ep /out/coredns \
 && getcap /out/coredns

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/coredns /coredns
USER nonroot:nonroot
EXPOSE 53 53/udp 9153
ENTRYPOINT ["/coredns"]
