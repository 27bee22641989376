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
	"regexp"
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

// FieldPath is the JSON path, as an SQL string literal, of a field that Flow Notify's patch indexes and pushes
// filters down to, and whether the field can have one (plain names only: they need no quoting inside the path).
func FieldPath(field string) (string, bool) {
	segments := strings.Split(field, ".")
	for _, s := range segments {
		if !pathSegment.MatchString(s) {
			return "", false
		}
	}

	return `'$."` + strings.Join(segments, `"."`) + `"'`, true
}

// FieldExpr is the SQL expression of a field's value that Flow Notify's patch indexes and pushes filters down
// to. Upstream indexes the field's JSON text (`->"field"`), which compares strings with their quotes and numbers
// (dates are milliseconds) as text, so no range could use it; `->>` is the SQL value: numbers compare as numbers,
// strings as their UTF-8 bytes (BSON's order within each type), NULL for a missing field or null, and the JSON
// text of an array or an object. The same text builds the index (registry.go) and every query against it
// (collection.go): SQLite matches an index to a query by the expression's text.
func FieldExpr(field string) (string, bool) {
	path, ok := FieldPath(field)
	if !ok {
		return "", false
	}

	return DefaultColumn + "->>" + path, true
}
