package cmd

import "github.com/spf13/cobra"

func jobLogsCommand() *cobra.Command { return &cobra.Command{Use: "logs", Hidden: true} }
