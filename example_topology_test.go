package gompj_test

import (
	"fmt"
	"log"

	"github.com/gompj/gompj"
)

// Six ranks as a 3x2 grid, periodic along its rows: each rank finds its coordinates and its neighbours, and a
// NeighborAllgather collects the neighbours' ranks (-1 stands for the ProcNull edges of the columns).
func ExampleComm_CartCreate() {
	err := gompj.RunWith(gompj.Config{Ranks: 6}, func(c *gompj.Comm) error {
		dims, err := gompj.DimsCreate(c.Size(), []int{0, 0})
		if err != nil {
			return err
		}
		grid, err := c.CartCreate(dims, []bool{true, false}, false)
		if err != nil {
			return err
		}
		got := []int{-1, -1, -1, -1} // up, down, left, right
		if err := grid.NeighborAllgather([]int{grid.Rank()}, got); err != nil {
			return err
		}
		if grid.Rank() == 3 {
			coords, _ := grid.CartCoords(3)
			fmt.Println("grid", dims, "rank 3 at", coords, "neighbours", got)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: grid [3 2] rank 3 at [1 1] neighbours [1 5 2 -1]
}

// A column of a row-major matrix, sent as a Vector view and received into a plain slice: no packing by hand.
func ExampleVector() {
	err := gompj.RunWith(gompj.Config{Ranks: 2}, func(c *gompj.Comm) error {
		const rows, cols = 3, 4
		if c.Rank() == 0 {
			m := []float64{
				0, 1, 2, 3,
				10, 11, 12, 13,
				20, 21, 22, 23,
			}
			col2, err := gompj.Vector(m[2:], rows, 1, cols)
			if err != nil {
				return err
			}
			return c.Send(col2, 1, 0)
		}
		got := make([]float64, rows)
		if _, err := c.Recv(got, 0, 0); err != nil {
			return err
		}
		fmt.Println(got)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: [2 12 22]
}
