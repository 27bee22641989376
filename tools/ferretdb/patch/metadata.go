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

// Package metadata provides access to databases and collections information.
package metadata

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/FerretDB/FerretDB/internal/backends"
)

// Collection will probably have a method for getting column name / SQLite path expression for the given document field
// once we implement field extraction.
// IDColumn probably should go away.
// TODO https://github.com/FerretDB/FerretDB/issues/226

const (
	// DefaultColumn is a column name for all fields.
	DefaultColumn = backends.ReservedPrefix + "sjson"

	// IDColumn is a SQLite path expression for _id field.
	//
	// Flow Notify's one-line patch (tools/ferretdb/patch, copied over the module by scripts/install.sh): upstream writes
	// "->'$._id'" here, while the unique _id index of every table is created on "->\"_id\"". SQLite matches an
	// index to a query by the expression's text, so every lookup, update and delete by _id scanned the table,
	// parsing each row's JSON (75 ms per update at 20,000 rows). Both forms select the same JSON value.
	IDColumn = DefaultColumn + `->"_id"`

	// RecordIDColumn is a name for RecordID column to store capped collection record id.
	RecordIDColumn = backends.ReservedPrefix + "record_id"
)

// Collection represents collection metadata.
//
// Collection value should be immutable to avoid data races.
// Use [deepCopy] to replace the whole value instead of modifying fields of existing value.
type Collection struct {
	Name      string
	TableName string
	Settings  Settings
}

// Capped returns true if collection is capped.
func (c Collection) Capped() bool {
	return c.Settings.CappedSize > 0
}

// deepCopy returns a deep copy.
func (c *Collection) deepCopy() *Collection {
	if c == nil {
		return nil
	}

	return &Collection{
		Name:      c.Name,
		TableName: c.TableName,
		Settings:  c.Settings.deepCopy(),
	}
}

// pathSegment is a field name an index expression can quote as it is.
var pathSegment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// fieldPaths are the JSON paths, as SQL string literals, of a field's value and of its type in the document's
// sjson schema ("$s"), and whether the field can have them (plain names only: they need no quoting inside a path).
func fieldPaths(field string) (value, typ string, ok bool) {
	segments := strings.Split(field, ".")
	for _, s := range segments {
		if !pathSegment.MatchString(s) {
			return "", "", false
		}
	}

	value = `'$."` + strings.Join(segments, `"."`) + `"'`
	typ = `'$."$s".p."` + strings.Join(segments, `"."$s".p."`) + `".t'`

	return value, typ, true
}

// BSON type ranks: MongoDB orders values of different types by these, then by value within a type. Missing and
// null share the lowest rank, and int, long and double are one rank, compared by their numeric values.
const (
	RankNull      = 1
	RankNumber    = 2
	RankString    = 3
	RankObject    = 4
	RankArray     = 5
	RankBinData   = 6
	RankObjectID  = 7
	RankBool      = 8
	RankDate      = 9
	RankTimestamp = 10
	RankRegex     = 11
)

// UnorderedRanks are the types whose SQL values do not compare as BSON compares them (JSON text of documents
// and arrays, base64 of binary data, timestamps, regular expressions): a sort is never served on them.
var UnorderedRanks = []int{RankObject, RankArray, RankBinData, RankTimestamp, RankRegex}

// RankExpr is the SQL expression of a field's BSON type rank, read from the document's sjson schema.
func RankExpr(field string) (string, bool) {
	_, typ, ok := fieldPaths(field)
	if !ok {
		return "", false
	}

	return "CASE " + DefaultColumn + "->>" + typ + rankCases + " ELSE " + strconv.Itoa(RankNull) + " END", true
}

// rankCases maps each sjson type name to its rank, in the order the index expression has always listed them (the
// text must stay the same: SQLite matches an index by it); null and a missing field fall to ELSE.
var rankCases = func() string {
	var b strings.Builder
	for _, tr := range []struct {
		typ  string
		rank int
	}{
		{"double", RankNumber}, {"int", RankNumber}, {"long", RankNumber}, {"string", RankString},
		{"object", RankObject}, {"array", RankArray}, {"binData", RankBinData}, {"objectId", RankObjectID},
		{"bool", RankBool}, {"date", RankDate}, {"timestamp", RankTimestamp}, {"regex", RankRegex},
	} {
		fmt.Fprintf(&b, " WHEN '%s' THEN %d", tr.typ, tr.rank)
	}

	return b.String()
}()

// FieldExpr is the SQL expression of a field's value within its rank: numbers as numbers (a double as REAL:
// sjson writes one of 2^53 to 2^63 as integer text, which SQLite would read as a nearby but different integer),
// a date as its milliseconds, a boolean 0 or 1, a string and an ObjectID's hex as text (UTF-8 bytes: BSON's
// order), and 0 for null and a missing field, which MongoDB sorts, matches and unique-indexes as one value.
func FieldExpr(field string) (string, bool) {
	value, typ, ok := fieldPaths(field)
	if !ok {
		return "", false
	}

	v := DefaultColumn + "->>" + value

	return "CASE " + DefaultColumn + "->>" + typ + " WHEN 'double' THEN CAST(" + v + " AS REAL) ELSE COALESCE(" + v + ", 0) END", true
}

// IndexColumns are the SQL columns Flow Notify's patch indexes a key on: its type rank, then its value, both in
// the key's direction, so that SQLite's order of the index is MongoDB's order of the field. collection.go pushes
// filters and sorts down to the same text (SQLite matches an index to a query by the expression's text).
func IndexColumns(field string, descending bool) ([]string, bool) {
	rank, ok := RankExpr(field)
	if !ok {
		return nil, false
	}

	value, _ := FieldExpr(field)

	if descending {
		return []string{rank + " DESC", value + " DESC"}, true
	}

	return []string{rank, value}, true
}
