package cmdutil

import "github.com/spf13/cobra"

// Group makes cmd a noun whose verbs are its subcommands: alone it prints
// its help; with an unknown verb it is a usage error.
func Group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			return Usagef("unknown command %q for %q (did you mean %s?)", args[0], cmd.CommandPath(), s[0])
		}
		return Usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd
}
