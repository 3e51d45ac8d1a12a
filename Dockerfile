# augment as a container image: a static binary on a distroless base, for
# the Kubernetes Indexed Job in deploy/kubernetes (and any other engine).
#   docker build -t augment:dev --build-arg VERSION=$(git describe --tags --always) .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /augment ./cmd/augment

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /augment /augment
USER nonroot:nonroot
ENTRYPOINT ["/augment"]
