package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	_ "modernc.org/sqlite" // the driver FerretDB itself uses
)

// upstreamColumn is one indexed field as upstream FerretDB writes it: the field's JSON text, `->"a"->"b"`.
var upstreamColumn = regexp.MustCompile(`_ferretdb_sjson((?:->"[A-Za-z_][A-Za-z0-9_]*")+)`)

// migrateIndexes rebuilds, in every database of dir, the indexes a FerretDB without the project's patch created
// on the fields' JSON text, on the fields' SQL values instead (metadata.FieldExpr in the patch), so the pushdown
// can use them. The unique _id index keeps its form (metadata.IDColumn matches it). It runs before FerretDB opens
// the files; an index already in the new form has no `->"` left, so a second run changes nothing, and each
// index is dropped and created in one transaction, so a crash leaves it in one form or the other.
func migrateIndexes(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.sqlite"))
	if err != nil {
		return err
	}

	for _, file := range files {
		if err := migrateFile(file); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(file), err)
		}
	}

	return nil
}

func migrateFile(file string) error {
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		return err
	}
	defer db.Close()

	rows, err := db.Query(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql LIKE '%_ferretdb_sjson->"%'`)
	if err != nil {
		return err
	}

	old := map[string]string{}
	for rows.Next() {
		var name, q string
		if err := rows.Scan(&name, &q); err != nil {
			rows.Close()
			return err
		}
		if !strings.HasSuffix(name, "__id_") {
			old[name] = q
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	for name, q := range old {
		rebuilt := upstreamColumn.ReplaceAllStringFunc(q, func(column string) string {
			fields := strings.Split(strings.TrimPrefix(column, `_ferretdb_sjson->`), "->")
			for i, f := range fields {
				fields[i] = strings.Trim(f, `"`)
			}
			return `_ferretdb_sjson->>'$."` + strings.Join(fields, `"."`) + `"'`
		})
		if rebuilt == q {
			continue
		}

		tx, err := db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(fmt.Sprintf("DROP INDEX %q", name)); err != nil {
			tx.Rollback()
			return err
		}
		if _, err := tx.Exec(rebuilt); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}

	return nil
}
