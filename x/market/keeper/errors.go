package keeper

import (
	"errors"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
)

// notFound turns collections' generic ErrNotFound into the module's own error,
// naming the missing object; other store errors pass through unchanged.
func notFound(err error, notFoundErr *errorsmod.Error, format string, args ...any) error {
	if errors.Is(err, collections.ErrNotFound) {
		return errorsmod.Wrapf(notFoundErr, format, args...)
	}
	return err
}
