// Flow Notify's patch (tools/ferretdb/patch, copied over the module by scripts/install.sh).

package handler

import (
	"fmt"

	"github.com/FerretDB/FerretDB/internal/handler/common"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/iterator"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// OrderedIterator passes on documents the backend read in the sort's order from an index, checking each against
// the one before with MongoDB's own sort comparison. The index orders each field by its BSON type rank, then by
// its value, and a sort is served only where no row holds a type whose SQL value compares otherwise than BSON
// (collection.go); this check is the guard behind that proof: a document out of order fails the query loudly
// rather than reaching the client.
func OrderedIterator(iter types.DocumentsIterator, closer *iterator.MultiCloser, sort *types.Document) (types.DocumentsIterator, error) { //nolint:lll // for readability
	res := &orderedIterator{iter: iter}

	for _, key := range sort.Keys() {
		sortType, err := common.GetSortType(key, must.NotFail(sort.Get(key)))
		if err != nil {
			return nil, lazyerrors.Error(err)
		}

		path, err := types.NewPathFromString(key)
		if err != nil {
			return nil, lazyerrors.Error(err)
		}

		res.keys = append(res.keys, orderKey{path: path, sortType: sortType})
	}

	closer.Add(res)

	return res, nil
}

type orderKey struct {
	path     types.Path
	sortType types.SortType
}

type orderedIterator struct {
	iter types.DocumentsIterator
	keys []orderKey
	prev *types.Document
}

// Next implements iterator.Interface.
func (iter *orderedIterator) Next() (struct{}, *types.Document, error) {
	unused, doc, err := iter.iter.Next()
	if err != nil {
		return unused, nil, err
	}

	if iter.prev != nil && !iter.inOrder(iter.prev, doc) {
		return unused, nil, lazyerrors.Errorf(
			"index order disagrees with the sort (a sort field holds values of mixed types): %v",
			fmt.Sprint(iter.keysOf()),
		)
	}

	iter.prev = doc

	return unused, doc, nil
}

// inOrder reports whether b may follow a.
func (iter *orderedIterator) inOrder(a, b *types.Document) bool {
	for _, key := range iter.keys {
		switch types.CompareOrderForSort(sortValue(a, key.path), sortValue(b, key.path), key.sortType) {
		case types.Less:
			return true
		case types.Greater:
			return false
		case types.Equal:
		}
	}

	return true
}

func (iter *orderedIterator) keysOf() []string {
	keys := make([]string, len(iter.keys))
	for i, key := range iter.keys {
		keys[i] = key.path.String()
	}

	return keys
}

// sortValue is the value a sort compares: null for a missing field, as MongoDB sorts it.
func sortValue(doc *types.Document, path types.Path) any {
	v, err := doc.GetByPath(path)
	if err != nil {
		return types.Null
	}

	return v
}

// Close implements iterator.Interface.
func (iter *orderedIterator) Close() {
	iter.iter.Close()
}

// check interfaces
var (
	_ types.DocumentsIterator = (*orderedIterator)(nil)
)
