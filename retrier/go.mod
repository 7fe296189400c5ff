module github.com/hookpipe/hookpipe/retrier

go 1.26.8

require (
	github.com/hookpipe/hookpipe/topics v0.0.0
	github.com/twmb/franz-go v1.22.2
	github.com/twmb/franz-go/pkg/kadm v1.19.0
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.0
	github.com/twmb/franz-go/plugin/kzap v1.1.2
	go.uber.org/zap v1.28.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)

replace github.com/hookpipe/hookpipe/topics => ../topics
