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
// account made before keys were kept) is left out.
func (c *Client) longKeys(ctx context.Context, ledger uint32, owners []ID, idOf func(key string) ID) (map[ID]string, error) {
	out := map[ID]string{}
	if len(owners) == 0 {
		return out, nil
	}
	firsts := make([]ID, len(owners))
	for i, o := range owners {
		firsts[i] = nameID(ledger, o, 0)
	}
	found, err := c.lookupAccounts(ctx, firsts)
	if err != nil {
		return nil, err
	}
	byID := map[ID]tb.Account{}
	for _, a := range found {
		byID[fromTB(a.ID)] = a
	}
	type partial struct {
		owner ID
		key   []byte
		want  int
	}
	var parts []partial
	var rest []ID
	for _, o := range owners {
		a, ok := byID[nameID(ledger, o, 0)]
		if !ok || a.Code != codeKeyName || a.Ledger != ledger {
			continue
		}
		chunk := nameChunk(a)
		p := partial{owner: o, want: int(binary.LittleEndian.Uint32(chunk[:4])), key: chunk[4:]}
		if p.want > MaxKeyLen {
			continue
		}
		for i := 1; len(p.key)+(i-1)*nameBytes < p.want; i++ {
			rest = append(rest, nameID(ledger, o, i))
		}
		parts = append(parts, p)
	}
	if len(rest) > 0 {
		more, err := c.lookupAccounts(ctx, rest)
		if err != nil {
			return nil, err
		}
		for _, a := range more {
			byID[fromTB(a.ID)] = a
		}
	}
	for _, p := range parts {
		key := p.key
		for i := 1; len(key) < p.want; i++ {
			a, ok := byID[nameID(ledger, p.owner, i)]
			if !ok {
				break
			}
			key = append(key, nameChunk(a)...)
		}
		if len(key) < p.want {
			continue
		}
		if k := string(key[:p.want]); idOf(k) == p.owner {
			out[p.owner] = k
		}
	}
	return out, nil
}
