// Command ferretdb runs FerretDB v1 (SQLite backend) embedded, for Flow Notify's local stack.
//
// Plain `go install github.com/FerretDB/FerretDB/cmd/ferretdb` panics on a missing version file,
// so the project owns this tiny main around the embeddable package instead.
// It prints one line "ready mongodb://HOST:PORT/" on stdout once it accepts connections
// ("ready mongodb://HOST:PORT/?tls=true" when -tls is set: the TLS listener is preferred).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served only when -pprof is set
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on (port 0 picks a free one; empty: no plain TCP)")
	// TLS listener (FerretDB's ListenerConfig): with -tls-ca, clients must present a certificate from that CA.
	tlsListen := flag.String("tls", "", "TLS address to listen on (off when empty); the ready line then names it")
	tlsCert := flag.String("tls-cert", "", "server certificate file (PEM), with -tls")
	tlsKey := flag.String("tls-key", "", "server key file (PEM), with -tls")
	tlsCA := flag.String("tls-ca", "", "CA file (PEM) whose client certificates are required, with -tls (optional)")
	data := flag.String("data", ".data/ferretdb", "folder holding the SQLite files")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	// WAL is FerretDB's default; FULL would fsync the WAL on every commit. NORMAL keeps every commit safe from
	// a process crash (only an OS crash or power loss may lose the last ones), which is what a local stack needs.
	synchronous := flag.String("synchronous", "full", "SQLite synchronous pragma: full or normal")
	pprof := flag.String("pprof", "", "serve Go's pprof handlers on this address (diagnostics; off when empty)")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fatal("bad -log-level: %s", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	dir, err := filepath.Abs(*data)
	if err != nil {
		fatal("bad -data: %s", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatal("cannot create data folder: %s", err)
	}

	if *synchronous != "full" && *synchronous != "normal" {
		fatal("bad -synchronous: %q", *synchronous)
	}

	if *tlsListen != "" && (*tlsCert == "" || *tlsKey == "") {
		fatal("-tls needs -tls-cert and -tls-key")
	}

	f, err := ferretdb.New(&ferretdb.Config{
		Listener: ferretdb.ListenerConfig{
			TCP:         *listen,
			TLS:         *tlsListen,
			TLSCertFile: *tlsCert,
			TLSKeyFile:  *tlsKey,
			TLSCAFile:   *tlsCA,
		},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/?_pragma=synchronous(" + *synchronous + ")",
	})
	if err != nil {
		fatal("%s", err)
	}

	if *pprof != "" {
		go func() { fatal("pprof: %s", http.ListenAndServe(*pprof, nil)) }()
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()

	// MongoDBURI waits for the listener to be bound.
	fmt.Printf("ready %s\n", f.MongoDBURI())
	<-done
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ferretdb: "+format+"\n", args...)
	os.Exit(1)
}
