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

package sqlite

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/FerretDB/FerretDB/internal/backends"
	"github.com/FerretDB/FerretDB/internal/backends/sqlite/metadata"
	"github.com/FerretDB/FerretDB/internal/handler/sjson"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/fsql"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// collection implements backends.Collection interface.
type collection struct {
	r      *metadata.Registry
	dbName string
	name   string
}

// newCollection creates a new Collection.
func newCollection(r *metadata.Registry, dbName, name string) backends.Collection {
	return backends.CollectionContract(&collection{
		r:      r,
		dbName: dbName,
		name:   name,
	})
}

// Query implements backends.Collection interface.
func (c *collection) Query(ctx context.Context, params *backends.QueryParams) (*backends.QueryResult, error) {
	db := c.r.DatabaseGetExisting(ctx, c.dbName)
	if db == nil {
		return &backends.QueryResult{
			Iter: newQueryIterator(ctx, nil, params.OnlyRecordIDs),
		}, nil
	}

	meta := c.r.CollectionGet(ctx, c.dbName, c.name)
	if meta == nil {
		return &backends.QueryResult{
			Iter: newQueryIterator(ctx, nil, params.OnlyRecordIDs),
		}, nil
	}

	q := prepareSelectClause(meta.TableName, params.Comment, meta.Capped(), params.OnlyRecordIDs)

	var orderBy *types.Document
	if params.Sort.Len() == 0 {
		orderBy = params.OrderBy
	}

	plan, err := c.pushdown(ctx, db, meta, params.Filter, orderBy)
	if err != nil {
		return nil, err
	}

	var args []any
	var ordered bool

	if plan != nil {
		var whereClause string
		whereClause, args = whereOf(plan.conds)
		q += whereClause
		q += plan.orderBy
		ordered = plan.orderBy != ""
	}

	q += prepareOrderByClause(params.Sort)

	if params.Limit != 0 {
		q += ` LIMIT ?`
		args = append(args, params.Limit)
	}

	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	return &backends.QueryResult{
		Iter:    newQueryIterator(ctx, rows, params.OnlyRecordIDs),
		Ordered: ordered,
	}, nil
}

// InsertAll implements backends.Collection interface.
func (c *collection) InsertAll(ctx context.Context, params *backends.InsertAllParams) (*backends.InsertAllResult, error) {
	if _, err := c.r.CollectionCreate(ctx, &metadata.CollectionCreateParams{DBName: c.dbName, Name: c.name}); err != nil {
		return nil, lazyerrors.Error(err)
	}

	db := c.r.DatabaseGetExisting(ctx, c.dbName)
	meta := c.r.CollectionGet(ctx, c.dbName, c.name)

	err := db.InTransaction(ctx, func(tx *fsql.Tx) error {
		batchSize := c.r.BatchSize
		if batchSize < 1 {
			panic("batch-size should be greater or equal to 1")
		}

		var batch []*types.Document
		docs := params.Docs

		for len(docs) > 0 {
			i := min(batchSize, len(docs))
			batch, docs = docs[:i], docs[i:]

			q, args, err := prepareInsertStatement(meta.TableName, meta.Capped(), batch)
			if err != nil {
				return lazyerrors.Error(err)
			}

			if _, err = tx.ExecContext(ctx, q, args...); err != nil {
				var se *sqlite3.Error
				if errors.As(err, &se) && se.Code() == sqlite3lib.SQLITE_CONSTRAINT_UNIQUE {
					return backends.NewError(backends.ErrorCodeInsertDuplicateID, err)
				}

				return lazyerrors.Error(err)
			}
		}

		return nil
	})
	if err != nil {
		return nil, err
	}

	return new(backends.InsertAllResult), nil
}

// UpdateAll implements backends.Collection interface.
func (c *collection) UpdateAll(ctx context.Context, params *backends.UpdateAllParams) (*backends.UpdateAllResult, error) {
	var res backends.UpdateAllResult
	db := c.r.DatabaseGetExisting(ctx, c.dbName)
	if db == nil {
		return &res, nil
	}

	meta := c.r.CollectionGet(ctx, c.dbName, c.name)
	if meta == nil {
		return &res, nil
	}

	q := fmt.Sprintf(`UPDATE %q SET %s = ? WHERE %s = ?`, meta.TableName, metadata.DefaultColumn, metadata.IDColumn)

	err := db.InTransaction(ctx, func(tx *fsql.Tx) error {
		for _, doc := range params.Docs {
			b, err := sjson.Marshal(doc)
			if err != nil {
				return lazyerrors.Error(err)
			}

			id, _ := doc.Get("_id")
			must.NotBeZero(id)

			arg := string(must.NotFail(sjson.MarshalSingleValue(id)))

			r, err := tx.ExecContext(ctx, q, string(b), arg)
			if err != nil {
				// Flow Notify's patch: a unique index refusing the new value is E11000, as for an insert.
				var se *sqlite3.Error
				if errors.As(err, &se) && se.Code() == sqlite3lib.SQLITE_CONSTRAINT_UNIQUE {
					return backends.NewError(backends.ErrorCodeInsertDuplicateID, err)
				}

				return lazyerrors.Error(err)
			}

			ra, err := r.RowsAffected()
			if err != nil {
				return lazyerrors.Error(err)
			}

			res.Updated += int32(ra)
		}

		return nil
	})
	if err != nil {
		return nil, err
	}

	return &res, nil
}

// DeleteAll implements backends.Collection interface.
func (c *collection) DeleteAll(ctx context.Context, params *backends.DeleteAllParams) (*backends.DeleteAllResult, error) {
	db := c.r.DatabaseGetExisting(ctx, c.dbName)
	if db == nil {
		return &backends.DeleteAllResult{Deleted: 0}, nil
	}

	meta := c.r.CollectionGet(ctx, c.dbName, c.name)
	if meta == nil {
		return &backends.DeleteAllResult{Deleted: 0}, nil
	}

	// TODO https://github.com/FerretDB/FerretDB/issues/3888

	var column string
	var placeholders []string
	var args []any

	if params.RecordIDs == nil {
		placeholders = make([]string, len(params.IDs))
		args = make([]any, len(params.IDs))

		for i, id := range params.IDs {
			placeholders[i] = "?"
			args[i] = string(must.NotFail(sjson.MarshalSingleValue(id)))
		}

		column = metadata.IDColumn
	} else {
		placeholders = make([]string, len(params.RecordIDs))
		args = make([]any, len(params.RecordIDs))

		for i, id := range params.RecordIDs {
			placeholders[i] = "?"
			args[i] = id
		}

		column = metadata.RecordIDColumn
	}

	// Flow Notify's patch: SQLite binds at most 32,766 parameters in one statement, so a delete of more ids (a
	// reaper's deleteMany of a month's rows) goes in statements of maxIDsPushedDown, each its own commit: MongoDB's
	// deleteMany is not atomic either, and one transaction would hold the database's writer for the whole backlog.
	var deleted int64

	for from := 0; from < len(args); from += maxIDsPushedDown {
		to := min(from+maxIDsPushedDown, len(args))
		q := fmt.Sprintf(
			`DELETE FROM %q WHERE %s IN (%s)`, meta.TableName, column, strings.Join(placeholders[from:to], ", "),
		)

		res, err := db.ExecContext(ctx, q, args[from:to]...)
		if err != nil {
			return nil, lazyerrors.Error(err)
		}

		ra, err := res.RowsAffected()
		if err != nil {
			return nil, lazyerrors.Error(err)
		}

		deleted += ra
	}

	return &backends.DeleteAllResult{
		Deleted: int32(deleted),
	}, nil
}

// Explain implements backends.Collection interface.
func (c *collection) Explain(ctx context.Context, params *backends.ExplainParams) (*backends.ExplainResult, error) {
	db := c.r.DatabaseGetExisting(ctx, c.dbName)
	if db == nil {
		return &backends.ExplainResult{
			QueryPlanner: must.NotFail(types.NewDocument()),
		}, nil
	}

	meta := c.r.CollectionGet(ctx, c.dbName, c.name)
	if meta == nil {
		return &backends.ExplainResult{
			QueryPlanner: must.NotFail(types.NewDocument()),
		}, nil
	}

	selectClause := prepareSelectClause(meta.TableName, "", meta.Capped(), false)

	var orderBy *types.Document
	if params.Sort.Len() == 0 {
		orderBy = params.OrderBy
	}

	plan, err := c.pushdown(ctx, db, meta, params.Filter, orderBy)
	if err != nil {
		return nil, err
	}

	var whereClause, orderByClause string
	var args []any

	if plan != nil {
		whereClause, args = whereOf(plan.conds)
		orderByClause = plan.orderBy
	}

	filterPushdown := whereClause != ""
	// Rows read in the sort's order stream, and the query's limit ends the read.
	streamed := orderByClause != ""

	orderByClause += prepareOrderByClause(params.Sort)
	sortPushdown := orderByClause != ""

	q := `EXPLAIN QUERY PLAN ` + selectClause + whereClause + orderByClause

	limitPushdown := streamed && params.RequestedLimit != 0

	if params.Limit != 0 {
		q += ` LIMIT ?`
		args = append(args, params.Limit)
		limitPushdown = true
	}

	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	defer rows.Close()

	queryPlan, err := types.NewArray()
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	for rows.Next() {
		var id int32
		var parent int32
		var notused int32
		var detail string

		// SQLite query plan can be interpreted as a tree.
		// Each row of query plan represents a node of this tree,
		// it contains node id, parent id, auxiliary integer field, and a description.
		// See https://www.sqlite.org/eqp.html for further details.
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return nil, lazyerrors.Error(err)
		}

		queryPlan.Append(fmt.Sprintf("id=%d parent=%d notused=%d detail=%s", id, parent, notused, detail))
	}

	return &backends.ExplainResult{
		QueryPlanner:   must.NotFail(types.NewDocument("Plan", queryPlan)),
		FilterPushdown: filterPushdown,
		SortPushdown:   sortPushdown,
		LimitPushdown:  limitPushdown,
	}, nil
}

// Stats implements backends.Collection interface.
func (c *collection) Stats(ctx context.Context, params *backends.CollectionStatsParams) (*backends.CollectionStatsResult, error) {
	db := c.r.DatabaseGetExisting(ctx, c.dbName)
	if db == nil {
		return nil, backends.NewError(
			backends.ErrorCodeCollectionDoesNotExist,
			lazyerrors.Errorf("no ns %s.%s", c.dbName, c.name),
		)
	}

	coll := c.r.CollectionGet(ctx, c.dbName, c.name)
	if coll == nil {
		return nil, backends.NewError(
			backends.ErrorCodeCollectionDoesNotExist,
			lazyerrors.Errorf("no ns %s.%s", c.dbName, c.name),
		)
	}
	stats, err := collectionsStats(ctx, db, []*metadata.Collection{coll}, params.Refresh)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	placeholders := make([]string, 0, len(coll.Settings.Indexes))
	args := make([]any, 0, len(coll.Settings.Indexes))
	indexMap := map[string]string{}

	for _, index := range coll.Settings.Indexes {
		placeholders = append(placeholders, "?")
		args = append(args, coll.TableName+"_"+index.Name)
		indexMap[coll.TableName+"_"+index.Name] = index.Name
	}

	q := fmt.Sprintf(`
		SELECT
			name,
			pgsize
		FROM dbstat
		WHERE name IN (%s) AND aggregate = TRUE`,
		strings.Join(placeholders, ", "),
	)

	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	defer rows.Close()

	indexSizes := make([]backends.IndexSize, len(indexMap))
	var i int

	for rows.Next() {
		var name string
		var size int64

		if err = rows.Scan(&name, &size); err != nil {
			return nil, lazyerrors.Error(err)
		}

		indexName, ok := indexMap[name]
		if !ok {
			// new index have been created since fetching metadata
			continue
		}

		indexSizes[i] = backends.IndexSize{
			Name: indexName,
			Size: size,
		}
		i++
	}

	if rows.Err() != nil {
		return nil, lazyerrors.Error(rows.Err())
	}

	return &backends.CollectionStatsResult{
		CountDocuments:  stats.countDocuments,
		SizeTotal:       stats.sizeTables + stats.sizeIndexes,
		SizeIndexes:     stats.sizeIndexes,
		SizeCollection:  stats.sizeTables,
		IndexSizes:      indexSizes,
		SizeFreeStorage: stats.sizeFreeStorage,
	}, nil
}

// Compact implements backends.Collection interface.
func (c *collection) Compact(ctx context.Context, params *backends.CompactParams) (*backends.CompactResult, error) {
	db := c.r.DatabaseGetExisting(ctx, c.dbName)
	if db == nil {
		return nil, backends.NewError(
			backends.ErrorCodeDatabaseDoesNotExist,
			lazyerrors.Errorf("no ns %s.%s", c.dbName, c.name),
		)
	}

	coll := c.r.CollectionGet(ctx, c.dbName, c.name)
	if coll == nil {
		return nil, backends.NewError(
			backends.ErrorCodeCollectionDoesNotExist,
			lazyerrors.Errorf("no ns %s.%s", c.dbName, c.name),
		)
	}

	q := `PRAGMA incremental_vacuum`
	if params != nil && params.Full {
		q = `VACUUM`
	}

	if _, err := db.ExecContext(ctx, q); err != nil {
		return nil, lazyerrors.Error(err)
	}

	return new(backends.CompactResult), nil
}

// ListIndexes implements backends.Collection interface.
func (c *collection) ListIndexes(ctx context.Context, params *backends.ListIndexesParams) (*backends.ListIndexesResult, error) {
	db := c.r.DatabaseGetExisting(ctx, c.dbName)
	if db == nil {
		return nil, backends.NewError(
			backends.ErrorCodeCollectionDoesNotExist,
			lazyerrors.Errorf("no ns %s.%s", c.dbName, c.name),
		)
	}

	coll := c.r.CollectionGet(ctx, c.dbName, c.name)
	if coll == nil {
		return nil, backends.NewError(
			backends.ErrorCodeCollectionDoesNotExist,
			lazyerrors.Errorf("no ns %s.%s", c.dbName, c.name),
		)
	}

	res := backends.ListIndexesResult{
		Indexes: make([]backends.IndexInfo, len(coll.Settings.Indexes)),
	}

	for i, index := range coll.Settings.Indexes {
		res.Indexes[i] = backends.IndexInfo{
			Name:   index.Name,
			Unique: index.Unique,
			Key:    make([]backends.IndexKeyPair, len(index.Key)),
		}

		for j, key := range index.Key {
			res.Indexes[i].Key[j] = backends.IndexKeyPair{
				Field:      key.Field,
				Descending: key.Descending,
			}
		}
	}

	sort.Slice(res.Indexes, func(i, j int) bool {
		return res.Indexes[i].Name < res.Indexes[j].Name
	})

	return &res, nil
}

// CreateIndexes implements backends.Collection interface.
func (c *collection) CreateIndexes(ctx context.Context, params *backends.CreateIndexesParams) (*backends.CreateIndexesResult, error) { //nolint:lll // for readability
	indexes := make([]metadata.IndexInfo, len(params.Indexes))
	for i, index := range params.Indexes {
		indexes[i] = metadata.IndexInfo{
			Name:   index.Name,
			Key:    make([]metadata.IndexKeyPair, len(index.Key)),
			Unique: index.Unique,
		}

		for j, key := range index.Key {
			indexes[i].Key[j] = metadata.IndexKeyPair{
				Field:      key.Field,
				Descending: key.Descending,
			}
		}
	}

	err := c.r.IndexesCreate(ctx, c.dbName, c.name, indexes)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	return new(backends.CreateIndexesResult), nil
}

// DropIndexes implements backends.Collection interface.
func (c *collection) DropIndexes(ctx context.Context, params *backends.DropIndexesParams) (*backends.DropIndexesResult, error) {
	err := c.r.IndexesDrop(ctx, c.dbName, c.name, params.Indexes)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	return new(backends.DropIndexesResult), nil
}

// check interfaces
var (
	_ backends.Collection = (*collection)(nil)
)

// maxIDsPushedDown keeps an _id $in list well under SQLite's limit of 32,766 bound parameters.
const maxIDsPushedDown = 10_000

// idPushdown is Flow Notify's patch (tools/ferretdb/patch, copied over the module by scripts/install.sh).
// Upstream pushes an _id down only when it is the filter's one key and an equality, so {_id, holder} (a claim's
// compare-and-set) and {_id: {$in: [...]}} (a fan-out's delivery records) read and decoded the whole collection
// in Go. Every caller filters the rows it gets again with the whole filter (common.FilterIterator), so narrowing
// by the _id alone is safe whatever else the filter holds; anything else is not narrowed.
func idPushdown(filter *types.Document) (string, []any) {
	if filter == nil || !filter.Has("_id") {
		return "", nil
	}

	v, _ := filter.Get("_id")
	if pushableID(v) {
		return fmt.Sprintf(` WHERE %s = ?`, metadata.IDColumn), []any{string(must.NotFail(sjson.MarshalSingleValue(v)))}
	}

	op, ok := v.(*types.Document)
	if !ok || op.Len() != 1 || !op.Has("$in") {
		return "", nil
	}
	list, ok := must.NotFail(op.Get("$in")).(*types.Array)
	if !ok || list.Len() == 0 || list.Len() > maxIDsPushedDown {
		return "", nil
	}

	args := make([]any, 0, list.Len())
	for i := 0; i < list.Len(); i++ {
		id := must.NotFail(list.Get(i))
		if !pushableID(id) {
			return "", nil
		}
		args = append(args, string(must.NotFail(sjson.MarshalSingleValue(id))))
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")
	return fmt.Sprintf(` WHERE %s IN (%s)`, metadata.IDColumn, marks), args
}

// pushableID reports whether an _id value is stored as the SQL text the pushdown compares with.
func pushableID(v any) bool {
	switch v.(type) {
	case string, types.ObjectID:
		return true
	default:
		return false
	}
}

// fieldCond is one index field's part of a pushed-down filter.
type fieldCond struct {
	sql  string
	args []any
	kind condKind
}

type condKind int

const (
	condEqual condKind = iota // one value: the index is pinned on this field
	condIn                    // several values
	condRange                 // $gt/$gte/$lt/$lte
)

// indexPlan is how one index serves a query: conditions on its leading fields, and the query's sort when the
// index yields rows in that order.
type indexPlan struct {
	fields  []string // the fields conds constrain, in index order
	conds   []fieldCond
	orderBy string   // ORDER BY clause, when the index serves the sort
	sorted  []string // the sort's fields, when it does
}

// pushdown is Flow Notify's patch: the WHERE (and ORDER BY) of a query, read from an index. Upstream SQLite
// FerretDB pushes only an `_id` equality down, so every other filter read the whole collection and evaluated it
// in Go. Here the filter's conditions on the leading fields of one of the collection's indexes narrow the read.
// Each index key is two columns (metadata.IndexColumns): the value's BSON type rank, then the value, so SQLite's
// order of an index is MongoDB's order and a condition names the type it compares with:
//   - equality and $in with null, numbers (compared exactly across int, long and double), strings, ObjectIDs,
//     booleans and dates, then one range with bounds of one type, which MongoDB's type bracketing confines to
//     that type's rank, as it is here;
//   - every caller still filters each row with the whole filter (common.FilterIterator), so a pushed-down
//     condition needs only to select a superset of the matching rows: conditions on other fields, $or and the
//     rest are evaluated in Go on the narrowed rows;
//   - a field holding an array matches through its elements in MongoDB, which an index on the field's value
//     cannot see: before using a field, one indexed read asks whether any row of the narrowed range holds an
//     array there, and the field is then not pushed down.
//
// The sort is served when its fields are the index's fields after those pinned by equality, in the index's
// directions or all reversed, and no row of the range holds a value whose SQL value does not compare as BSON
// does (metadata.UnorderedRanks: documents, arrays, binary data, timestamps, regular expressions): it is refused
// before a row is read, and the rows then stream in MongoDB's order, so a limit ends the read.
func (c *collection) pushdown(ctx context.Context, db *fsql.DB, meta *metadata.Collection, filter, orderBy *types.Document) (*indexPlan, error) { //nolint:lll // for readability
	if where, args := idPushdown(filter); where != "" {
		return &indexPlan{fields: []string{"_id"}, conds: []fieldCond{{sql: strings.TrimPrefix(where, " WHERE "), args: args}}}, nil
	}

	var plans []*indexPlan

	for _, index := range meta.Settings.Indexes {
		if index.Name == backends.DefaultIndexName {
			continue
		}

		if plan := planIndex(index, filter, orderBy); plan != nil {
			plans = append(plans, plan)
		}
	}

	// Best first: the array probes of the best plan are usually the only ones a query pays for.
	sort.SliceStable(plans, func(i, j int) bool { return plans[i].better(plans[j]) })

	var best *indexPlan

	for _, plan := range plans {
		checked, err := c.withoutUnordered(ctx, db, meta, plan)
		if err != nil {
			return nil, err
		}

		if checked == plan {
			if best == nil || checked.better(best) {
				best = checked
			}

			break
		}

		if checked != nil && (best == nil || checked.better(best)) {
			best = checked
		}
	}

	return best, nil
}

// better prefers more constrained fields, then a served sort.
func (p *indexPlan) better(than *indexPlan) bool {
	if len(p.conds) != len(than.conds) {
		return len(p.conds) > len(than.conds)
	}

	return p.orderBy != "" && than.orderBy == ""
}

// planIndex is how index serves filter and orderBy: nil when it serves neither.
func planIndex(index metadata.IndexInfo, filter, orderBy *types.Document) *indexPlan {
	plan := new(indexPlan)
	pinned := 0

	for _, key := range index.Key {
		if strings.Contains(key.Field, ".") || filter == nil || !filter.Has(key.Field) {
			break
		}

		cond, ok := condition(key.Field, must.NotFail(filter.Get(key.Field)))
		if !ok {
			break
		}

		plan.fields = append(plan.fields, key.Field)
		plan.conds = append(plan.conds, cond)

		if cond.kind == condEqual && pinned == len(plan.conds)-1 {
			pinned++
		}

		if cond.kind == condRange {
			break
		}
	}

	plan.orderBy, plan.sorted = orderClause(index, plan.conds, pinned, orderBy)

	if len(plan.conds) == 0 && plan.orderBy == "" {
		return nil
	}

	return plan
}

// orderClause is the ORDER BY that reads index in orderBy's order once its first pinned fields are fixed by
// equality, or "". A condition past the pinned fields must be a range on the sort's first field: an $in reads
// several runs of the index, each in order but not the whole.
func orderClause(index metadata.IndexInfo, conds []fieldCond, pinned int, orderBy *types.Document) (string, []string) { //nolint:lll // for readability
	keys := orderBy.Keys()
	if len(keys) == 0 || pinned+len(keys) > len(index.Key) || len(conds) > pinned+1 {
		return "", nil
	}

	ranged := len(conds) == pinned+1
	if ranged && conds[pinned].kind != condRange {
		return "", nil
	}

	var forward, backward bool
	var clauses []string

	for i, field := range keys {
		key := index.Key[pinned+i]
		descending := must.NotFail(orderBy.Get(field)).(int64) == -1
		columns, ok := metadata.IndexColumns(field, descending)
		if !ok || key.Field != field || strings.Contains(field, ".") {
			return "", nil
		}

		if descending == key.Descending {
			forward = true
		} else {
			backward = true
		}

		// A range fixes its field's type rank (condition): SQLite sees that an equality fixes a column, not an
		// expression, and would sort the rows again if the rank stayed in the ORDER BY.
		if i == 0 && ranged {
			columns = columns[1:]
		}

		clauses = append(clauses, columns...)
	}

	if forward && backward {
		return "", nil
	}

	return " ORDER BY " + strings.Join(clauses, ", "), keys
}

// condition is the pushed-down form of one field's filter value, when it has one.
func condition(field string, v any) (fieldCond, bool) {
	rankExpr, ok := metadata.RankExpr(field)
	if !ok {
		return fieldCond{}, false
	}

	expr, _ := metadata.FieldExpr(field)

	if rank, arg, ok := sqlValue(v); ok {
		return fieldCond{sql: fmt.Sprintf("%s = %d AND %s = ?", rankExpr, rank, expr), args: []any{arg}, kind: condEqual}, true
	}

	op, ok := v.(*types.Document)
	if !ok || op.Len() == 0 {
		return fieldCond{}, false
	}

	if op.Len() == 1 && op.Has("$in") {
		list, ok := must.NotFail(op.Get("$in")).(*types.Array)
		if !ok || list.Len() == 0 || list.Len() > maxIDsPushedDown {
			return fieldCond{}, false
		}

		var ranks []int
		args := make([]any, list.Len())

		for i := range args {
			var rank int
			if rank, args[i], ok = sqlValue(must.NotFail(list.Get(i))); !ok {
				return fieldCond{}, false
			}

			if !slices.Contains(ranks, rank) {
				ranks = append(ranks, rank)
			}
		}

		marks := strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")
		sql := fmt.Sprintf("%s IN (%s) AND %s IN (%s)", rankExpr, joinInts(ranks), expr, marks)

		return fieldCond{sql: sql, args: args, kind: condIn}, true
	}

	parts := []string{""}
	var args []any
	rank := 0

	for _, name := range op.Keys() {
		var sqlOp string

		switch name {
		case "$gt":
			sqlOp = ">"
		case "$gte":
			sqlOp = ">="
		case "$lt":
			sqlOp = "<"
		case "$lte":
			sqlOp = "<="
		default:
			return fieldCond{}, false
		}

		boundRank, arg, ok := sqlValue(must.NotFail(op.Get(name)))
		if !ok || (rank != 0 && boundRank != rank) {
			return fieldCond{}, false
		}

		rank = boundRank
		parts = append(parts, expr+" "+sqlOp+" ?")
		args = append(args, arg)
	}

	parts[0] = fmt.Sprintf("%s = %d", rankExpr, rank)

	return fieldCond{sql: strings.Join(parts, " AND "), args: args, kind: condRange}, true
}

// sqlValue is v's BSON type rank and v as FieldExpr yields it, for the types pushed down.
func sqlValue(v any) (int, any, bool) {
	switch v := v.(type) {
	case types.NullType:
		return metadata.RankNull, int64(0), true
	case string:
		return metadata.RankString, v, true
	case types.ObjectID:
		return metadata.RankObjectID, hex.EncodeToString(v[:]), true
	case int32:
		return metadata.RankNumber, int64(v), true
	case int64:
		return metadata.RankNumber, v, true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) || !exactInSQLite(v) {
			return 0, nil, false
		}

		return metadata.RankNumber, v, true
	case time.Time:
		return metadata.RankDate, v.UnixMilli(), true
	case bool:
		if v {
			return metadata.RankBool, int64(1), true
		}

		return metadata.RankBool, int64(0), true
	default:
		return 0, nil, false
	}
}

// exactInSQLite is whether SQLite reads v's JSON text back as v. Its text-to-REAL conversion (modernc's, without
// an extended-precision long double) lands on a neighbouring double for some magnitudes past 1e22 or below 1e-22,
// so a stored value there sits in the index as that neighbour: a bound there is left to FerretDB's own filter, which
// compares the documents' values exactly.
func exactInSQLite(v float64) bool {
	a := math.Abs(v)

	return a == 0 || (a > 1e-22 && a < 1e22)
}

// joinInts is ranks as an SQL list, in order (the same query gets the same text).
func joinInts(ranks []int) string {
	ranks = slices.Clone(ranks)
	sort.Ints(ranks)

	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(r)
	}

	return strings.Join(s, ", ")
}

// withoutUnordered answers plan itself when no field it uses holds an array and no sorted field holds a type
// SQLite orders otherwise than MongoDB. Otherwise it keeps the plan's conditions up to the first field that holds
// an array in a row of the range the conditions before it select, and its sort only if no sorted field holds such
// a type.
func (c *collection) withoutUnordered(ctx context.Context, db *fsql.DB, meta *metadata.Collection, plan *indexPlan) (*indexPlan, error) { //nolint:lll // for readability
	for i, field := range plan.fields {
		has, err := holdsRank(ctx, db, meta, plan.conds[:i], field, []int{metadata.RankArray})
		if err != nil {
			return nil, err
		}

		if has {
			// Only the fields before this one, and no sort.
			if i == 0 {
				return nil, nil
			}

			return &indexPlan{fields: plan.fields[:i], conds: plan.conds[:i]}, nil
		}
	}

	for _, field := range plan.sorted {
		has, err := holdsRank(ctx, db, meta, plan.conds, field, metadata.UnorderedRanks)
		if err != nil {
			return nil, err
		}

		if has {
			if len(plan.conds) == 0 {
				return nil, nil
			}

			return &indexPlan{fields: plan.fields, conds: plan.conds}, nil
		}
	}

	return plan, nil
}

// holdsRank asks the index whether a row selected by conds holds a value of one of ranks in field.
func holdsRank(ctx context.Context, db *fsql.DB, meta *metadata.Collection, conds []fieldCond, field string, ranks []int) (bool, error) { //nolint:lll // for readability
	rankExpr, _ := metadata.RankExpr(field)

	where, args := whereOf(conds)
	if where == "" {
		where = " WHERE "
	} else {
		where += " AND "
	}

	q := fmt.Sprintf(`SELECT 1 FROM %q%s%s IN (%s) LIMIT 1`, meta.TableName, where, rankExpr, joinInts(ranks))

	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return false, lazyerrors.Error(err)
	}

	defer rows.Close()

	has := rows.Next()
	if err = rows.Err(); err != nil {
		return false, lazyerrors.Error(err)
	}

	return has, nil
}

// whereOf is the WHERE clause of conds (empty for none).
func whereOf(conds []fieldCond) (string, []any) {
	if len(conds) == 0 {
		return "", nil
	}

	parts := make([]string, len(conds))
	var args []any

	for i, cond := range conds {
		parts[i] = "(" + cond.sql + ")"
		args = append(args, cond.args...)
	}

	return " WHERE " + strings.Join(parts, " AND "), args
}
