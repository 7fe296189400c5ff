package schema

import (
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hookpipe/hookpipe/runtime/config"
)

// Environment variables of the ClickHouse connection, shared by the recorder, the API and
// webhookctl (docs/configuration.md).
const (
	EnvClickHouseAddr     = "WEBHOOKS_CLICKHOUSE_ADDR"
	EnvClickHouseDatabase = "WEBHOOKS_CLICKHOUSE_DATABASE"
	EnvClickHouseUser     = "WEBHOOKS_CLICKHOUSE_USER"
	EnvClickHousePassword = "WEBHOOKS_CLICKHOUSE_PASSWORD"
	// EnvRetentionDays is the default retention of attempts, in days: the
	// TTL where the server has TTL, and what webhookctl clickhouse expire
	// applies to tenants without an override of their own.
	EnvRetentionDays = "WEBHOOKS_CLICKHOUSE_RETENTION_DAYS"
)

// Defaults of the ClickHouse connection (the Config tags say the same).
const (
	DefaultClickHouseAddr = "127.0.0.1:9000"
	DefaultDatabase       = "webhooks"
)

// Conn locates ClickHouse: the recorder writes there, the API and
// webhookctl read.
type Conn struct {
	// ClickHouse is the native-protocol address (host:port, comma-separated
	// for several replicas).
	ClickHouse []string `env:"WEBHOOKS_CLICKHOUSE_ADDR" envDefault:"127.0.0.1:9000" desc:"ClickHouse native-protocol addresses, host:port, comma-separated for replicas."`
	// Database holds the tables: letters, digits and underscores.
	Database string `env:"WEBHOOKS_CLICKHOUSE_DATABASE" envDefault:"webhooks" desc:"ClickHouse database of the tables (letters, digits, underscores)."`
	// User and Password authenticate; the password is never logged.
	User     string `env:"WEBHOOKS_CLICKHOUSE_USER" envDefault:"default" desc:"ClickHouse user."`
	Password string `env:"WEBHOOKS_CLICKHOUSE_PASSWORD" desc:"ClickHouse password (never logged)."`
}

// Parsers read the fields of Conn that runtime/config does not know (the
// address list), for config.Parse.
var Parsers = []config.Parser{config.ParserFor(func(v string) ([]string, error) { return config.SplitList(v), nil })}

// Open connects to ClickHouse over the native protocol; readTimeout bounds
// every query.
func (c Conn) Open(readTimeout time.Duration) (driver.Conn, error) {
	ch, err := clickhouse.Open(&clickhouse.Options{
		Addr:        c.ClickHouse,
		Protocol:    clickhouse.Native,
		Auth:        clickhouse.Auth{Username: c.User, Password: c.Password},
		DialTimeout: 5 * time.Second,
		ReadTimeout: readTimeout,
		// LZ4 on the native protocol: fewer bytes on the wire, and no
		// more CPU on either side (BenchmarkClickHouseRows).
		Compression:     &clickhouse.Compression{Method: clickhouse.CompressionLZ4},
		MaxOpenConns:    4,
		MaxIdleConns:    2,
		ConnMaxLifetime: 10 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	return ch, nil
}
