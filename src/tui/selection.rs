//! Selections and scrolling shared by the lists: `Follow<K>`, a selection
//! that stays on its item by key as the list changes, and `Window`, the rows
//! of a table on screen with `scroll` to keep the selected one in view.
//!
//! Owns this arithmetic only. It knows no pane, key or `View`: each list
//! hands in its own keys.

/// The rows of a table on screen, written while drawing so that scrolling
/// is sticky and PgUp/PgDn move by what is visible.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub offset: usize,
    pub rows: usize,
}

impl Window {
    /// A page for PgUp/PgDn: the rows last drawn, at least one.
    pub fn page(self) -> isize {
        self.rows.max(1) as isize
    }
}

/// Keeps the selected row in view, moving the window as little as possible.
pub fn scroll(mut w: Window, selected: Option<usize>, rows: usize, len: usize) -> Window {
    w.rows = rows;
    if rows == 0 {
        return w;
    }
    if let Some(sel) = selected {
        if sel < w.offset {
            w.offset = sel;
        } else if sel >= w.offset + rows {
            w.offset = sel + 1 - rows;
        }
    }
    w.offset = w.offset.min(len.saturating_sub(rows));
    w
}

/// A selection in a list that follows its item by key as the list changes,
/// and falls back to the same place when the item is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Follow<K> {
    key: Option<K>,
    at: usize,
}

impl<K> Default for Follow<K> {
    fn default() -> Self {
        Follow { key: None, at: 0 }
    }
}

impl<K: PartialEq + Clone> Follow<K> {
    /// Position in `keys` of the selected item; `None` for an empty list.
    pub fn position(&self, keys: &[K]) -> Option<usize> {
        if keys.is_empty() {
            return None;
        }
        if let Some(k) = &self.key
            && let Some(i) = keys.iter().position(|x| x == k)
        {
            return Some(i);
        }
        Some(self.at.min(keys.len() - 1))
    }

    /// The selected item when it is no longer in `keys` (it ended, or a
    /// filter hides it): the selection then stands on a neighbour the
    /// operator did not choose, and must say so.
    pub fn left(&self, keys: &[K]) -> Option<&K> {
        self.key.as_ref().filter(|k| !keys.contains(k))
    }

    fn move_to(&mut self, keys: &[K], index: isize) {
        if keys.is_empty() {
            return;
        }
        let i = index.clamp(0, keys.len() as isize - 1) as usize;
        self.key = Some(keys[i].clone());
        self.at = i;
    }

    /// Moves by `delta` items, stopping at either end.
    pub fn move_by(&mut self, keys: &[K], delta: isize) {
        let current = self.position(keys).map(|i| i as isize).unwrap_or(0);
        self.move_to(keys, current.saturating_add(delta));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_whose_item_left_says_so_until_it_moves() {
        let mut f = Follow::default();
        f.move_by(&[1, 2, 3], 1);
        assert_eq!((f.position(&[1, 2, 3]), f.left(&[1, 2, 3])), (Some(1), None));
        assert_eq!((f.position(&[3, 1]), f.left(&[3, 1])), (Some(1), Some(&2)), "on a neighbour, and it says which left");
        f.move_by(&[3, 1], 0);
        assert_eq!(f.left(&[3, 1]), None, "moving picks the row under the cursor");
    }

    #[test]
    fn scrolling_is_sticky() {
        let w = scroll(Window::default(), Some(12), 5, 20);
        assert_eq!(w, Window { offset: 8, rows: 5 });
        let w = scroll(w, Some(10), 5, 20);
        assert_eq!(w.offset, 8, "inside the window: no move");
        let w = scroll(w, Some(3), 5, 20);
        assert_eq!(w.offset, 3);
        let w = scroll(Window { offset: 30, rows: 5 }, None, 5, 20);
        assert_eq!(w.offset, 15);
    }
}
