# One image holding every hookpipe binary (dispatcher, deliverer, retrier,
# recorder, webhookctl, api) in its PATH; the Helm chart (charts/webhooks) runs
# each component from it by name.
#
#   docker build --build-arg VERSION=0.1.0 -t ghcr.io/hookpipe/hookpipe:0.1.0 .
FROM golang:1.26 AS build
ARG VERSION=dev
WORKDIR /src
COPY . .
# The API's front-end assets, from the npm registry at the pinned versions.
RUN bash pipeline/scripts/npm-assets.sh api/assets/npm.lock api/assets/dist
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -X github.com/hookpipe/hookpipe/runtime/version.Version=${VERSION}" -o /out/ \
      ./dispatcher/cmd/dispatcher ./deliverer/cmd/deliverer ./retrier/cmd/retrier \
      ./recorder/cmd/recorder ./pipeline/cmd/webhookctl ./api/cmd/api

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
