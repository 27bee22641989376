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
	"sync"
)

// Flow Notify's patch: an update, a findAndModify and a delete read the documents their filter matches, change
// them in Go and write them back by _id, with nothing tying the write to the read: two concurrent $inc of one
// document both read n and both write n+1, and two compare-and-swaps of one revision both win (upstream v1 does
// the same, its issue #3040). Each of these commands holds its collection's writer across its read and its
// write, so the filter that matched and the change are one step, as in MongoDB. SQLite takes one writer at a
// time anyway; reads and inserts do not wait (an insert's exclusivity is its unique _id).

// collectionWriters holds one writer slot (a channel of capacity one) per "database\x00collection".
var collectionWriters sync.Map

// lockCollection waits for the collection's writer slot, or for ctx to end, and returns its release.
func lockCollection(ctx context.Context, db, collection string) (func(), error) {
	slot, _ := collectionWriters.LoadOrStore(db+"\x00"+collection, make(chan struct{}, 1))
	writer := slot.(chan struct{})

	select {
	case writer <- struct{}{}:
		return func() { <-writer }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
