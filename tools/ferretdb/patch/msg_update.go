// Copyright 2021 FerretDB Inc.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package handler

import (
	"context"
	"errors"
	"fmt"

	"github.com/FerretDB/wire"
	"github.com/FerretDB/wire/wirebson"
	"go.mongodb.org/mongo-driver/mongo"

	"github.com/FerretDB/FerretDB/internal/backends"
	"github.com/FerretDB/FerretDB/internal/handler/common"
	"github.com/FerretDB/FerretDB/internal/handler/handlererrors"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/iterator"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// MsgUpdate implements `update` command.
//
// The passed context is canceled when the client connection is closed.
func (h *Handler) MsgUpdate(connCtx context.Context, msg *wire.OpMsg) (*wire.OpMsg, error) {
	document, err := opMsgDocument(msg)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	params, err := common.GetUpdateParams(document, h.L)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	// GetUpdateParams ignores `ordered` (upstream never honoured it); true unless the command says otherwise.
	ordered := true
	if v, _ := document.Get("ordered"); v != nil {
		if b, ok := v.(bool); ok {
			ordered = b
		}
	}

	matched, modified, upserted, writeErrors, err := h.updateDocument(connCtx, params, ordered)
	if err != nil {
		return nil, handleUpdateError(params.DB, params.Collection, "update", err)
	}

	res := must.NotFail(types.NewDocument(
		"n", matched,
	))

	if upserted.Len() != 0 {
		res.Set("upserted", upserted)
	}

	res.Set("nModified", modified)

	if writeErrors.Len() > 0 {
		res.Set("writeErrors", writeErrors)
	}

	res.Set("ok", float64(1))

	return documentOpMsg(
		res,
	)
}

// updateDocument iterate through all documents in collection and update them.
//
// Flow Notify's patch: a statement that fails is reported in writeErrors at its own index, beside what the others
// did, as MongoDB answers; an ordered command stops there, an unordered one goes on with the next statement.
// Upstream stopped at the first failure whatever `ordered` said, and reported it at index 0 without the counts.
func (h *Handler) updateDocument(ctx context.Context, params *common.UpdateParams, ordered bool) (int32, int32, *types.Array, *types.Array, error) { //nolint:lll // for readability
	var matched, modified int32
	var upserted types.Array
	writeErrors := types.MakeArray(0)

	db, err := h.b.Database(params.DB)
	if err != nil {
		if backends.ErrorCodeIs(err, backends.ErrorCodeDatabaseNameIsInvalid) {
			msg := fmt.Sprintf("Invalid namespace specified '%s.%s'", params.DB, params.Collection)
			return 0, 0, nil, nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "update")
		}

		return 0, 0, nil, nil, lazyerrors.Error(err)
	}

	err = db.CreateCollection(ctx, &backends.CreateCollectionParams{Name: params.Collection})

	switch {
	case err == nil:
		// nothing
	case backends.ErrorCodeIs(err, backends.ErrorCodeCollectionAlreadyExists):
		// nothing
	case backends.ErrorCodeIs(err, backends.ErrorCodeCollectionNameIsInvalid):
		msg := fmt.Sprintf("Invalid collection name: %s", params.Collection)
		return 0, 0, nil, nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "insert")
	default:
		return 0, 0, nil, nil, lazyerrors.Error(err)
	}

	for i, u := range params.Updates {
		c, err := db.Collection(params.Collection)
		if err != nil {
			if backends.ErrorCodeIs(err, backends.ErrorCodeCollectionNameIsInvalid) {
				msg := fmt.Sprintf("Invalid collection name: %s", params.Collection)
				return 0, 0, nil, nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "insert")
			}

			return 0, 0, nil, nil, lazyerrors.Error(err)
		}

		result, err := h.updateOne(ctx, c, params, &u)
		if err != nil {
			we := statementWriteError(params.DB, params.Collection, i, err)
			if we == nil {
				return 0, 0, nil, nil, err
			}

			writeErrors.Append(WriteErrorDocument(we))

			if ordered {
				break
			}

			continue
		}

		matched += result.Matched.Count
		modified += result.Modified.Count

		if result.Upserted.Doc != nil {
			doc := result.Upserted.Doc
			upserted.Append(must.NotFail(types.NewDocument(
				"index", int32(i),
				"_id", must.NotFail(doc.Get("_id")),
			)))

			// in case of upsert, MongoDB sets the matched count to 1
			matched++
		}
	}

	return matched, modified, &upserted, writeErrors, nil
}

// statementWriteError is a failed statement's error as MongoDB reports it in writeErrors, at its index; nil for an
// error of the server's own (the command fails).
func statementWriteError(db, coll string, index int, err error) *mongo.WriteError {
	err = handleUpdateError(db, coll, "update", err)

	var ce *handlererrors.CommandError
	if errors.As(err, &ce) {
		return &mongo.WriteError{Index: index, Code: int(ce.Code()), Message: ce.Err().Error()}
	}

	var we *handlererrors.WriteErrors
	if !errors.As(err, &we) || we.Len() == 0 {
		return nil
	}

	errs, _ := we.Document().Get("writeErrors").(*wirebson.Array)
	if errs == nil || errs.Len() == 0 {
		return nil
	}

	first, _ := errs.Get(0).(*wirebson.Document)
	if first == nil {
		return nil
	}

	code, _ := first.Get("code").(int32)
	msg, _ := first.Get("errmsg").(string)

	return &mongo.WriteError{Index: index, Code: int(code), Message: msg}
}

// updateOne performs one update statement holding the collection's writer (lockCollection, Flow Notify's patch).
func (h *Handler) updateOne(ctx context.Context, c backends.Collection, params *common.UpdateParams, u *common.Update) (*common.UpdateResult, error) { //nolint:lll // for readability
	unlock, err := lockCollection(ctx, params.DB, params.Collection)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}
	defer unlock()

	var qp backends.QueryParams
	if !h.DisablePushdown {
		qp.Filter = u.Filter
	}

	res, err := c.Query(ctx, &qp)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	closer := iterator.NewMultiCloser()
	defer closer.Close()

	closer.Add(res.Iter)

	iter := common.FilterIterator(res.Iter, closer, u.Filter)

	if !u.Multi {
		iter = common.LimitIterator(iter, closer, 1)
	}

	result, err := common.UpdateDocument(ctx, c, "update", iter, u)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	return result, nil
}
