module github.com/tblimit/tblimit

go 1.26

require github.com/tigerbeetle/tigerbeetle-go v0.17.9 // indirect
