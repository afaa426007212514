package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/depinchain/depinchain/cmd/depinchaind/dashboard"
	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
)

func dashboardCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the job owner's web dashboard (jobs, loss curves, money, disputes, providers, network)",
		Long: `Serves a web dashboard on --listen. It reads only the chain's public gRPC queries
(--grpc-addr) and the providers' public checkpoint ports, and its pages poll it, so
they stay live without a reload. Every asset, Chart.js included, is embedded in
this binary. With --rest-addr the pages link each checkpoint to its public REST route.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			listen, _ := cmd.Flags().GetString("listen")
			addr, _ := cmd.Flags().GetString(flagGRPCAddr)
			rest, _ := cmd.Flags().GetString("rest-addr")
			poll, _ := cmd.Flags().GetDuration("poll")
			src, conn, err := jobview.Dial(addr)
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			chainID := ""
			if st, err := src.NodeInfo(ctx); err == nil {
				chainID = st
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: dashboard.Handler(src, dashboard.Config{ChainID: chainID, RESTAddr: rest, PollMillis: int(poll.Milliseconds())}),
				ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "dashboard on http://%s/ (chain %s over gRPC %s)\n", ln.Addr(), chainID, addr)
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().String("listen", "127.0.0.1:8080", "where to serve the dashboard (host:port)")
	cmd.Flags().String(flagGRPCAddr, "127.0.0.1:9090", "the node's gRPC endpoint (host:port)")
	cmd.Flags().String("rest-addr", "", "the node's public REST endpoint (e.g. http://127.0.0.1:1317), linked from the pages")
	cmd.Flags().Duration("poll", 2*time.Second, "how often the pages poll")
	return cmd
}
