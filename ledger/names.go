package ledger

import (
	"context"
	"encoding/binary"

	tb "github.com/tigerbeetle/tigerbeetle-go"
)

// A TigerBeetle cluster keeps no strings. A user account keeps its key in
// its user_data_128 when the key is at most 16 bytes; a longer key (a UUID
// has 36) is kept in name accounts beside it: accounts of nothing, on the
// user's ledger with code codeKeyName, each holding 28 bytes of the key in
// its user_data_128, user_data_64 and user_data_32, and named after the
// user account and their place. The first holds the key's length in its
// user_data_32 and its first 24 bytes. They are created with the user, in
// the same request, so that listings, histories and audits name every
// user; reading them costs a lookup for the first of each user listed and
// one for the rest.
//
// We considered storing the names in transfers of nothing (kept for ever
// too, but about 440 bytes each with their indexes against an account's
// 128) and outside the cluster (a second store to keep in step with the
// first): accounts cost least and live and die with the user's.

// nameBytes is how many bytes of a key one name account holds: its first
// holds 4 fewer, for the key's length.
const nameBytes = 28

// nameID is the ID of name account i of the user account owner.
func nameID(ledger uint32, owner ID, i int) ID {
	var k [20]byte
	copy(k[:16], owner[:])
	binary.LittleEndian.PutUint32(k[16:], uint32(i))
	return derive(roleKeyName, ledger, string(k[:]))
}

// nameAccounts are the name accounts of key, whose user account on ledger
// is owner: none for a key of at most 16 bytes.
func nameAccounts(ledger uint32, owner ID, key string) []tb.Account {
	if len(key) <= 16 {
		return nil
	}
	// Chunk 0: length (4 bytes) and 24 bytes; then 28 bytes each.
	data := binary.LittleEndian.AppendUint32(nil, uint32(len(key)))
	data = append(data, key...)
	var out []tb.Account
	for i := 0; len(data) > 0; i++ {
		var chunk [nameBytes]byte
		n := copy(chunk[:], data)
		data = data[n:]
		var ud128 [16]byte
		copy(ud128[:], chunk[4:20])
		out = append(out, tb.Account{
			ID:          nameID(ledger, owner, i).tb(),
			UserData128: tb.BytesToUint128(ud128),
			UserData64:  binary.LittleEndian.Uint64(chunk[20:28]),
			UserData32:  binary.LittleEndian.Uint32(chunk[0:4]),
			Ledger:      ledger,
			Code:        codeKeyName,
		})
	}
	return out
}

// nameChunk is the 28 bytes name account a holds.
func nameChunk(a tb.Account) []byte {
	chunk := binary.LittleEndian.AppendUint32(nil, a.UserData32)
	ud := a.UserData128.Bytes()
	chunk = append(chunk, ud[:]...)
	return binary.LittleEndian.AppendUint64(chunk, a.UserData64)
}

// longKeys reads the keys of the user accounts owners on ledger from their
// name accounts, checked against each account's ID (idOf derives it from a
// key). An owner without name accounts (a key of at most 16 bytes, or an
// account made before keys were kept) is left out. It makes a lookup for
// the first name account of every owner, and one for the rest.
func (c *Client) longKeys(ctx context.Context, ledger uint32, owners []ID, idOf func(key string) ID) (map[ID]string, error) {
	out := map[ID]string{}
	if len(owners) == 0 {
		return out, nil
	}
	names := map[ID]tb.Account{} // the name accounts read, by ID
	firsts := make([]ID, len(owners))
	for i, o := range owners {
		firsts[i] = nameID(ledger, o, 0)
	}
	if err := c.readNames(ctx, firsts, names); err != nil {
		return nil, err
	}
	keys, rest := startKeys(ledger, owners, names)
	if len(rest) > 0 {
		if err := c.readNames(ctx, rest, names); err != nil {
			return nil, err
		}
	}
	for _, k := range keys {
		if key, ok := k.finish(ledger, names); ok && idOf(key) == k.owner {
			out[k.owner] = key
		}
	}
	return out, nil
}

// longKey is a key being read from its name accounts.
type longKey struct {
	owner ID     // its user account
	key   []byte // what its first name account holds of it
	want  int    // its length
}

// readNames looks up the name accounts ids and adds those found to names.
func (c *Client) readNames(ctx context.Context, ids []ID, names map[ID]tb.Account) error {
	found, err := c.lookupAccounts(ctx, ids)
	if err != nil {
		return err
	}
	for _, a := range found {
		names[fromTB(a.ID)] = a
	}
	return nil
}

// startKeys starts the keys of owners from their first name accounts,
// found in names, and returns them with the IDs of the name accounts that
// hold the rest. An owner whose first name account is missing, or says its
// key is longer than MaxKeyLen, is left out.
func startKeys(ledger uint32, owners []ID, names map[ID]tb.Account) (keys []longKey, rest []ID) {
	for _, o := range owners {
		a, ok := names[nameID(ledger, o, 0)]
		if !ok || a.Code != codeKeyName || a.Ledger != ledger {
			continue
		}
		chunk := nameChunk(a)
		k := longKey{owner: o, want: int(binary.LittleEndian.Uint32(chunk[:4])), key: chunk[4:]}
		if k.want > MaxKeyLen {
			continue
		}
		for i := 1; len(k.key)+(i-1)*nameBytes < k.want; i++ {
			rest = append(rest, nameID(ledger, o, i))
		}
		keys = append(keys, k)
	}
	return keys, rest
}

// finish returns k whole, from its name accounts after the first, found in
// names; false if one is missing.
func (k longKey) finish(ledger uint32, names map[ID]tb.Account) (string, bool) {
	key := k.key
	for i := 1; len(key) < k.want; i++ {
		a, ok := names[nameID(ledger, k.owner, i)]
		if !ok {
			return "", false
		}
		key = append(key, nameChunk(a)...)
	}
	return string(key[:k.want]), true
}
