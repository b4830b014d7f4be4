# Two stages: compiling needs the Go toolchain, running needs only the binary.
# --platform=$BUILDPLATFORM compiles natively and cross-compiles for the target,
# so `docker buildx build --platform linux/arm64` needs no emulator.
FROM --platform=$BUILDPLATFORM golang:1.26-alpine AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY *.go ./
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /operador .

# No shell, no package manager: just the static binary, run as an unprivileged user.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /operador /operador
USER 65532:65532
ENTRYPOINT ["/operador"]
