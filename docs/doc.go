// Package docs holds tblimit's guides; its test checks the links between them.
package docs
