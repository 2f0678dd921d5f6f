# The restartbed image: one static binary, whose `kubelet` subcommand the shards of
# config/kubelet/shards.yaml run (docs/scale-out.md). Build it from the repository's root:
#
#   docker build -t restartbed/restartbed:dev .
#
# The control-plane subcommands (up, run, bench) build kube-apiserver and the other binaries
# from source on first use and need the Go toolchain; this image is for `restartbed kubelet`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/restartbed ./cmd/restartbed

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/restartbed /restartbed
USER 65532:65532
ENTRYPOINT ["/restartbed"]
